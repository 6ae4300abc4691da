"""People's verdicts on whether a lesson fitted a ticket, and what the estimate learns from them."""

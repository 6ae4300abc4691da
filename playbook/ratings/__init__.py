"""Model ratings of the lessons shown for a ticket: what to rate, the prompt, the stored rows."""

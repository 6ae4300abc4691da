"""The controlled holdout (issue 27): which tickets are shown lessons, and what that changes."""

"""Tests of what the bot keeps per repository."""

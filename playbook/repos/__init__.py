"""What the bot keeps per repository: its settings file as last read, and its rule-file sync."""

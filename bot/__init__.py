"""The bot: configuration, CLI, GitHub/Jira clients, event handlers, worker and scheduler."""

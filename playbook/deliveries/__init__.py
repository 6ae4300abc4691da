"""Deliveries: the webhook inbox, leases, heartbeats, the bot's comments, effects, retention."""

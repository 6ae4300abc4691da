"""Event handlers, one module per behaviour; importing this package registers them all."""

from bot.handlers.router import IGNORED, Event, router

__all__ = ["IGNORED", "Event", "router"]

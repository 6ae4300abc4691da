"""Event handlers, one module per behaviour; importing this package registers them all."""

from bot.handlers import commands, installations, pull_requests, retrieve_and_comment
from bot.handlers.context import Ignored, PermanentError
from bot.handlers.router import IGNORED, Event, router

__all__ = [
    "IGNORED",
    "Event",
    "Ignored",
    "PermanentError",
    "commands",
    "installations",
    "pull_requests",
    "retrieve_and_comment",
    "router",
]

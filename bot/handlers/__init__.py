"""Event handlers, one module per behaviour, each with its own router; combined here."""

from bot.handlers import (
    commands,
    embed_jobs,
    installations,
    merge_jobs,
    model_jobs,
    pull_anchors,
    pull_requests,
    reactions,
    reposts,
    retrieve_and_comment,
    rule_files,
    settings_files,
)
from bot.handlers.context import Ignored, PermanentError
from bot.handlers.router import IGNORED, Event, Router

# Everything the bot handles: each feature's router, in the order their handlers run.
router = Router(
    commands.router,
    installations.router,
    pull_requests.router,
    pull_anchors.router,
    reactions.router,
    retrieve_and_comment.router,
    reposts.router,
    model_jobs.router,
    merge_jobs.router,
    embed_jobs.router,
    settings_files.router,
    rule_files.router,
)

__all__ = [
    "IGNORED",
    "Event",
    "Ignored",
    "PermanentError",
    "commands",
    "embed_jobs",
    "installations",
    "merge_jobs",
    "model_jobs",
    "pull_anchors",
    "pull_requests",
    "reactions",
    "reposts",
    "retrieve_and_comment",
    "router",
    "rule_files",
    "settings_files",
]

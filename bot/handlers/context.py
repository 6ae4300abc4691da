"""Reading webhook payloads into domain values, and the side-effect wrapper handlers share."""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypeVar

from bot import claims
from bot.effects import TicketRef, log_effect
from bot.github import NotConfigured
from bot.outcomes import Ignored, PermanentError
from playbook import clock
from playbook.text import Ticket

if TYPE_CHECKING:
    from bot.handlers.router import Event
    from bot.worker import Services

log = logging.getLogger(__name__)
T = TypeVar("T")

__all__ = ["Ignored", "PermanentError", "effect", "github_issue", "jira_ticket", "require", "when"]


def require(payload: dict[str, Any], *path: str) -> Any:
    """``payload[path[0]][path[1]]...``, or a PermanentError naming what is missing."""
    value: Any = payload
    for name in path:
        if not isinstance(value, dict) or name not in value:
            raise PermanentError(f"payload has no {'.'.join(path)}")
        value = value[name]
    return value


def when(value: str | None) -> datetime | None:
    """A GitHub/Jira timestamp, or None."""
    return clock.parse_time(value) if value else None


def jira_ticket(event: Event) -> tuple[Ticket, TicketRef]:
    """The Jira issue a delivery is about."""
    issue = require(event.payload, "issue")
    require(issue, "key")
    return Ticket.from_jira(issue), TicketRef.jira(issue["key"])


def github_issue(event: Event) -> tuple[Ticket, TicketRef]:
    """The GitHub issue (or PR, for comments) a delivery is about."""
    issue = require(event.payload, "issue")
    repo = require(event.payload, "repository", "full_name")
    ref = TicketRef.github(repo, int(require(issue, "number")), event.installation_id)
    return Ticket.from_github(issue, repo), ref


def effect(
    services: Services, ref: TicketRef, action: str, call: Callable[[], T]
) -> tuple[bool, T | None]:
    """Run a side effect, logging it as done, or as skipped with the setting that enables it.

    The delivery's lease is renewed first: a worker that lost its delivery to another
    worker raises LeaseLost here instead of acting twice.
    """
    claims.check()
    try:
        result = call()
    except NotConfigured as missing:
        log.warning("%s on %s skipped: %s", action, ref.key, missing)
        log_effect(services.engine, ref, action, "skipped", str(missing))
        return False, None
    dry = type(services.out).__name__ == "DryRunEffects"
    log_effect(services.engine, ref, action, "dry_run" if dry else "done")
    return True, result

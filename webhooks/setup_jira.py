"""The Jira half of the setup page: the webhook to create in Jira, and what last reached it."""

from __future__ import annotations

import hashlib
import hmac
import threading
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import Any

from flask import Flask, current_app

# The events bot/handlers register for Jira, as Jira's webhook page names them.
EVENTS = (
    ("jira:issue_created", "Issue: created"),
    ("jira:issue_updated", "Issue: updated"),
    ("comment_created", "Comment: created"),
)
JQL_EXAMPLE = "project in (CTMS, PB) AND issuetype != Epic"
_KEY = "playbook_jira_heard"
_LOCK = threading.Lock()


@dataclass(frozen=True)
class Heard:
    """The last request /webhooks/jira answered: when, its status, and what that meant."""

    at: str
    status: int
    verdict: str
    event: str | None = None
    ticket: str | None = None


def suggested_secret(setup_token: str) -> str:
    """A secret for JIRA_WEBHOOK_SECRET, the same on every reload and process during setup."""
    return hmac.new(setup_token.encode(), b"playbook-jira-webhook", hashlib.sha256).hexdigest()


def heard(
    app: Flask, status: int, verdict: str, event: str | None = None, ticket: str | None = None
) -> None:
    """Remember what /webhooks/jira answered last (this process only)."""
    at = datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    with _LOCK:
        app.extensions[_KEY] = Heard(at, status, verdict[:300], event, ticket)


def last(app: Flask | None = None) -> dict[str, Any]:
    """The last Jira request as the setup page shows it: ``{"heard": false}`` before any."""
    found = (app or current_app).extensions.get(_KEY)
    if found is None:
        return {"heard": False, "summary": "Nothing has reached /webhooks/jira yet."}
    summary = f"{found.at}: {found.verdict}"
    if found.event:
        summary += f" ({found.event}{f', {found.ticket}' if found.ticket else ''})"
    return {"heard": True, "accepted": found.status < 300, "summary": summary, **asdict(found)}

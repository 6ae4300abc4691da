"""A small scope of lessons, the bot's comments on tickets, and people's verdicts on them."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

from sqlalchemy import Engine

from playbook import clock, db
from playbook.fit import labels
from playbook.lessons import lifecycle
from playbook.models import BotComment

NOW = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)

LESSONS = [
    ("Retry webhooks with an idempotency key", "global"),
    ("Never hold a database lock across HTTP", "global"),
    ("Pin chromium in CI for screenshots", "acme/api"),
    ("Vendor the chart library for the stats page", "other/web"),
    ("Rotate the staging keys after each drill", "acme/api"),
    ("Compress nightly log archives before upload", "acme/api"),
]


def lessons(engine: Engine) -> list[str]:
    """The lessons pb-1 .. pb-6 (scopes as in LESSONS), all active."""
    with db.transaction(engine) as session:
        return [
            lifecycle.add(session, text, learned_from=f"CTMS-{n}", scope=scope, actor="t").bullet.id
            for n, (text, scope) in enumerate(LESSONS, 1)
        ]


def commented(
    engine: Engine, ticket_key: str, shown: Sequence[tuple[str, float]], target: str = "github"
) -> None:
    """The bot's lessons comment on the ticket, showing these (lesson, estimate)."""
    with db.transaction(engine) as session:
        session.add(
            BotComment(
                target=target,
                ticket_key=ticket_key,
                purpose="lessons",
                state="posted",
                external_id="1",
                bullet_ids=[b for b, _ in shown],
                relevances=[p for _, p in shown],
                body="lessons",
                created_at=clock.now(),
                updated_at=clock.now(),
            )
        )


def reply(
    engine: Engine,
    ticket_key: str,
    bullet_id: str,
    helpful: bool,
    actor: str = "ana",
    reason: str | None = None,
    target: str = "github",
) -> None:
    """``/playbook helpful|unhelpful BULLET [reason]`` by ``actor`` on the ticket."""
    verdict = labels.Verdict(ticket_key, bullet_id, helpful, labels.COMMAND, target, actor, reason)
    with db.transaction(engine) as session:
        labels.record(session, verdict)


def react(
    engine: Engine, ticket_key: str, bullet_ids: Sequence[str], reactions: dict[str, bool]
) -> None:
    """The comment's 👍 (True) and 👎 (False) by person, as read from GitHub."""
    with db.transaction(engine) as session:
        labels.replace_reactions(session, "github", ticket_key, bullet_ids, reactions)

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


def off_topic_world(engine: Engine) -> list[str]:
    """Verdicts that list some lessons as off-topic and, each for one reason, not others.

    - pb-6 (acme/api) missed on acme/api#1-3 for ana (a reply with a reason), bob and cy (👎),
      and helped dan on #4: 3 of 4 unhelpful, listed in acme/api.
    - pb-2 (global): three 👎 by ana alone: not listed (one person).
    - pb-3 (acme/api): 👎 by ana and bob on acme/api#5 only: not listed (one ticket).
    - pb-5 (acme/api): 3 unhelpful and 2 helpful: not listed (share 3/5 < 2/3); ana's 👎
      on #9 is overridden by her reply that pb-5 helped there.
    - pb-4 (other/web): 3 unhelpful by two people on two tickets: listed in other/web.
    - pb-1 (global): one miss in acme/api and two in CTMS: listed only across scopes.
    """
    ids = lessons(engine)
    pb1, pb2, pb3, pb4, pb5, pb6 = ids
    for n in (1, 2, 3):
        commented(engine, f"acme/api#{n}", [(pb6, 0.05), (pb2, 0.02)])
    reply(engine, "acme/api#1", pb6, False, "ana", reason="about\nlog shipping, not builds")
    react(engine, "acme/api#2", [pb6], {"bob": False})
    react(engine, "acme/api#3", [pb6], {"cy": False})
    commented(engine, "acme/api#4", [(pb6, 0.2)])
    reply(engine, "acme/api#4", pb6, True, "dan")
    for n in (1, 2, 3):
        reply(engine, f"acme/api#{n}", pb2, False, "ana")
    commented(engine, "acme/api#5", [(pb3, 0.03)])
    react(engine, "acme/api#5", [pb3], {"ana": False, "bob": False, "cy": False})
    for n, reactions in (
        (6, {"ana": False}),
        (7, {"bob": False}),
        (8, {"cy": False}),
        (9, {"dan": True, "ana": False}),
    ):
        commented(engine, f"acme/api#{n}", [(pb5, 0.04), (pb1, 0.03)])
        react(engine, f"acme/api#{n}", [pb5], reactions)
    reply(engine, "acme/api#9", pb5, True, "ana")
    for n, actor in ((1, "eve"), (2, "eve"), (2, "fay")):
        reply(engine, f"other/web#{n}", pb4, False, actor)
    reply(engine, "acme/api#7", pb1, False, "cy")
    for n, actor in ((1, "gus"), (2, "hal")):
        commented(engine, f"CTMS-{n}", [(pb1, 0.05)], target="jira")
        reply(engine, f"CTMS-{n}", pb1, False, actor, target="jira")
    return ids

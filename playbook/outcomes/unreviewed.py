"""Lessons written by an author without write access: no outcome of the bot makes them active.

A PR's Lessons section is its author's text. A merge vouches for the code a maintainer read,
not for that text, so a lesson captured from an author who cannot write to the repository
(a fork's contributor, say) stays proposed until a person approves it, whatever happens to
the PR: its merge, a later PR for the ticket, a revert and its undoing. The mark is the
capture's own revision (append-only, written by the bot), so nothing after it can remove it.
"""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from playbook.models import Revision

# Ends the reason of the capture's revision: the one fact this rule reads back.
MARK = (
    "its author has no write access to the repository: "
    "it stays proposed until a maintainer approves it"
)
# Why an outcome left such a lesson as it was (the outcome's "kept" line).
WAITS = "its author has no write access: a maintainer approves it"
# A person's decision that makes the lesson theirs: from then on outcomes move it as any other.
_VOUCHING = ("approve", "restore")


def capture_reason(reason: str, author: str | None) -> str:
    """The capture revision's ``reason`` for a lesson by ``author``, who may not write."""
    return f"{reason}, by {author or 'an unknown author'}; {MARK}"


def awaits_maintainer(session: Session, bullet_id: str, bot: str) -> bool:
    """Whether the lesson was captured from an author without write access and no person
    (anyone but ``bot``) has approved or restored it since."""
    rows = session.execute(
        select(Revision.action, Revision.actor, Revision.reason)
        .where(Revision.bullet_id == bullet_id)
        .order_by(Revision.id)
    ).all()
    if not rows or rows[0].action != "create" or not (rows[0].reason or "").endswith(MARK):
        return False
    return not any(row.action in _VOUCHING and not is_bot(row.actor, bot) for row in rows[1:])


def is_bot(actor: str, bot: str) -> bool:
    """Whether a revision's actor is the bot itself (``bot``, or ``bot (what it acted on)``)."""
    return actor == bot or actor.startswith(f"{bot} (")

"""The search log: what each ticket's search showed, recorded as loads once per ticket."""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Sequence
from typing import Protocol

from sqlalchemy import select
from sqlalchemy.orm import Session

from playbook import clock
from playbook.models import Bullet, Retrieval
from playbook.outcomes import usage
from playbook.search.text import Ticket, synthesize_query


class Hit(Protocol):
    """A shown lesson as the log reads it (`retrieval.Hit`)."""

    @property
    def bullet_id(self) -> str: ...

    @property
    def rank(self) -> int: ...


# What a ticket's search log keeps of it, so that tickets nobody had a lesson for can be grouped
# into gaps: its summary, and the text searched (summary, the start of the description, labels),
# both bounded, since a label list has no length limit of its own.
TITLE_CHARS = 300
TEXT_CHARS = 2_000
# The `rank_by` of a held-out ticket's search log: it was shown nothing by design, so counts of
# tickets and coverage leave it out, as they leave out the tickets that never had a search.
HELD_OUT = "held_out"


def _log(
    session: Session,
    ticket_key: str | None,
    query_id: str,
    rank_by: str,
    hits: list[Hit],
    ticket: Ticket | None = None,
    titled: bool = True,
    spoke: bool | None = None,
) -> None:
    session.add(
        Retrieval(
            ticket_key=ticket_key,
            query_id=query_id,
            rank_by=rank_by,
            bullet_ids=[hit.bullet_id for hit in hits],
            at=clock.now(),
            title=ticket.summary[:TITLE_CHARS] if ticket and titled else None,
            text=searched_text(ticket) if ticket else None,
            spoke=spoke,
        )
    )


def searched_text(ticket: Ticket) -> str:
    """The text a ticket's search used, as its log keeps it (at most TEXT_CHARS)."""
    return synthesize_query(ticket)[:TEXT_CHARS]


def record_shown(
    session: Session,
    ticket_key: str,
    hits: list[Hit],
    query_id: str,
    rank_by: str = "feedback",
    ticket: Ticket | None = None,
    spoke: bool | None = None,
) -> int:
    """Record the lessons a ticket's comment shows as loads, each once per ticket.

    A ticket edited five times shows mostly the same lessons five times; counting them
    again would reward being shown, not being useful. Returns how many were new. The log
    keeps ``ticket``'s summary and searched text, for `playbook.gaps`, and ``spoke``: whether
    the bot's comment showed lessons (False: none reached the relevance floor).
    """
    _log(session, ticket_key, query_id, rank_by, hits, ticket, spoke=spoke)
    if not hits:
        return 0
    events = usage.record(
        session,
        "loaded",
        [hit.bullet_id for hit in hits],
        ticket_key=ticket_key,
        ranks=[hit.rank for hit in hits],
        query_id=query_id,
        consumer="playbook-bot",
        dedup_keys=[_shown_key(ticket_key, hit.bullet_id) for hit in hits],
    )
    return len(events)


def record_held_out(session: Session, ticket_key: str, ticket: Ticket, query_id: str) -> None:
    """Log a held-out ticket's search: it was shown nothing, and its text is kept for gaps.

    The lessons it would have been shown are the experiment's exposures, not part of this log.
    """
    _log(session, ticket_key, query_id, HELD_OUT, [], ticket)


def record_shown_ids(
    session: Session, ticket_key: str, bullet_ids: Sequence[str], rank_by: str = "feedback"
) -> int:
    """Record the lessons a comment posted later shows (by id, ranked in order) as loads.

    A comment kept while credentials were missing and posted afterwards has no search hits
    at hand, only the ids it lists; they count once per ticket, as `record_shown`'s do.
    Lessons removed from the playbook since are left out. Returns how many were new.
    """
    ids = list(dict.fromkeys(bullet_ids))
    known = set(session.scalars(select(Bullet.id).where(Bullet.id.in_(ids)))) if ids else set()
    shown = [bullet_id for bullet_id in ids if bullet_id in known]
    query_id = uuid.uuid4().hex  # the search that chose them was not kept
    session.add(
        Retrieval(
            ticket_key=ticket_key,
            query_id=query_id,
            rank_by=rank_by,
            bullet_ids=shown,
            at=clock.now(),
        )
    )
    if not shown:
        return 0
    events = usage.record(
        session,
        "loaded",
        shown,
        ticket_key=ticket_key,
        ranks=[ids.index(bullet_id) + 1 for bullet_id in shown],
        query_id=query_id,
        consumer="playbook-bot",
        dedup_keys=[_shown_key(ticket_key, bullet_id) for bullet_id in shown],
    )
    return len(events)


def _shown_key(ticket_key: str, bullet_id: str) -> str:
    return usage.once_key("loaded", ticket_key, bullet_id)


def _load_key(query_id: str, bullet_id: str) -> str:
    return hashlib.sha256(f"load:{query_id}:{bullet_id}".encode()).hexdigest()

"""👍/👎 on the bot's lessons comment as fit verdicts: one vote per person, stored, refitted."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime

from sqlalchemy import String, literal, select
from sqlalchemy.orm import Session

from playbook import clock
from playbook.deliveries.comments import LESSONS
from playbook.fit import calibration, labels
from playbook.models import BotComment, Bullet, FitLabel

# The reactions that say whether the lessons fitted; 😄, 🎉, 👀... say nothing about fit.
VERDICTS = {"+1": True, "-1": False}
# `reactions_etag` of a comment GitHub answered 404 for (a person deleted it), with its id: a
# comment the bot posts again gets a new id, which is read again.
GONE = "gone:"
_NEVER = datetime.min.replace(tzinfo=UTC)


@dataclass(frozen=True)
class Reaction:
    """One reaction as GitHub lists it: who, whether that account is a bot, what, when."""

    login: str
    is_bot: bool
    content: str
    at: datetime | None = None
    id: int = 0


@dataclass(frozen=True)
class Due:
    """A lessons comment whose reactions are to be read, as it was when picked."""

    id: int
    ticket_key: str
    external_id: str
    etag: str | None


def votes(reactions: Iterable[Reaction], own: str | None = None) -> dict[str, bool]:
    """Each person's verdict: 👍 is True, 👎 False; bots and the bot's own account never count.

    A person who left both 👍 and 👎 changed their mind: the later one counts (by GitHub's
    time, then its id, which grows). Logins compare without case, as GitHub's do.
    """
    mine = (own or "").lower()
    latest: dict[str, tuple[tuple[datetime, int], bool, str]] = {}
    for reaction in reactions:
        helpful = VERDICTS.get(reaction.content)
        who = reaction.login.lower()
        if helpful is None or reaction.is_bot or not who or who == mine:
            continue
        order = (reaction.at or _NEVER, reaction.id)
        if who not in latest or order >= latest[who][0]:
            latest[who] = (order, helpful, reaction.login)
    return {login: helpful for _, helpful, login in latest.values()}


def _readable():
    """Posted GitHub lessons comments, but not one GitHub said it no longer has."""
    gone = literal(GONE, String) + BotComment.external_id
    return (
        (BotComment.target == "github")
        & (BotComment.purpose == LESSONS)
        & (BotComment.state == "posted")
        & BotComment.external_id.is_not(None)
        & (BotComment.reactions_etag.is_(None) | (BotComment.reactions_etag != gone))
    )


def _due(session: Session, row: BotComment) -> Due:
    """The comment to read; without its ETag when it shows other lessons than its verdicts are on.

    A reaction is a verdict on the lessons the comment shows now: after an edit changed them,
    an unchanged list of reactions must be read again (a 304 would keep the old lessons').
    """
    etag = row.reactions_etag
    if etag is not None:
        judged = set(
            session.scalars(
                select(FitLabel.bullet_id).where(
                    FitLabel.ticket_key == row.ticket_key, FitLabel.source == labels.REACTION
                )
            )
        )
        if judged:
            listed = list(row.bullet_ids or [])
            shown = set(session.scalars(select(Bullet.id).where(Bullet.id.in_(listed))))
            etag = etag if judged == shown else None
    return Due(row.id, row.ticket_key, row.external_id or "", etag)


def lessons_comment(session: Session, ticket_key: str) -> Due | None:
    """The ticket's GitHub lessons comment, if it has one GitHub still has."""
    found = session.scalars(
        select(BotComment).where(_readable(), BotComment.ticket_key == ticket_key)
    ).first()
    return _due(session, found) if found is not None else None


def due(session: Session, since: datetime, limit: int) -> list[Due]:
    """At most ``limit`` lessons comments posted or changed since ``since``, never-read first,
    then the longest unread: each run of a bounded sweep reaches the ones the last left."""
    rows = session.scalars(
        select(BotComment)
        .where(_readable(), BotComment.updated_at >= since)
        .order_by(
            BotComment.reactions_read_at.is_not(None),
            BotComment.reactions_read_at,
            BotComment.id,
        )
        .limit(limit)
    ).all()
    return [_due(session, row) for row in rows]


def _current(session: Session, comment: Due) -> BotComment | None:
    row = session.get(BotComment, comment.id)
    # Posted again since it was read (a person deleted it): those reactions were the old one's.
    return row if row is not None and row.external_id == comment.external_id else None


def mark_read(
    session: Session, comment: Due, etag: str | None = None, now: datetime | None = None
) -> None:
    """Nothing changed (a 304) or nothing could be read: read again after the others."""
    row = _current(session, comment)
    if row is not None:
        row.reactions_read_at = now or clock.now()
        if etag is not None:
            row.reactions_etag = etag


def mark_gone(session: Session, comment: Due, now: datetime | None = None) -> None:
    """GitHub no longer has the comment: stop reading it (the verdicts given stay)."""
    row = _current(session, comment)
    if row is not None:
        row.reactions_etag = GONE + comment.external_id
        row.reactions_read_at = now or clock.now()


def store(
    session: Session,
    comment: Due,
    verdicts: Mapping[str, bool],
    *,
    etag: str | None,
    scope: str | None = None,
    now: datetime | None = None,
) -> int | None:
    """Make the comment's reaction verdicts ``verdicts`` and refit the scope's calibration.

    Returns the verdicts written, or None when the comment changed hands meanwhile. Only
    fit labels change: a lesson's status, confidence, cites and ratings are never touched.
    """
    row = _current(session, comment)
    if row is None:
        return None
    now = now or clock.now()
    scope = scope or labels.ticket_scope(row.ticket_key)
    written = labels.replace_reactions(
        session, row.target, row.ticket_key, row.bullet_ids or [], verdicts, now, scope=scope
    )
    calibration.refit(session, scope, now)
    row.reactions_etag = etag
    row.reactions_read_at = now
    return written

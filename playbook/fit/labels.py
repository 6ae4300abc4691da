"""Record, replace and withdraw people's fit verdicts (👍/👎 and `/playbook helpful|unhelpful`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from playbook import clock
from playbook.models import BotComment, Bullet, FitCalibration, FitLabel
from playbook.scope_names import scope_of
from playbook.search.relevance import shifted

REACTION = "reaction"
COMMAND = "command"
SOURCES = (REACTION, COMMAND)
# A reply's reason is kept for a maintainer to read, not searched: a line is enough.
REASON_CHARS = 500


@dataclass(frozen=True)
class Verdict:
    """One person's verdict on one lesson for one ticket."""

    ticket_key: str
    bullet_id: str
    helpful: bool
    source: str
    target: str
    actor: str
    reason: str | None = None
    # The scope the ticket was searched in, when its settings file names one; else its key's.
    scope: str | None = None


def ticket_scope(ticket_key: str) -> str:
    """The scope whose calibration a verdict about this ticket trains (global without one)."""
    return scope_of(ticket_key) or "global"


def shown_relevance(session: Session, target: str, ticket_key: str, bullet_id: str) -> float | None:
    """The estimate the bot's comment on the ticket showed for the lesson (None: not shown)."""
    return _shown_in(_lessons_comment(session, target, ticket_key), bullet_id)


def _lessons_comment(session: Session, target: str, ticket_key: str) -> BotComment | None:
    return session.scalars(
        select(BotComment).where(
            BotComment.target == target,
            BotComment.ticket_key == ticket_key,
            BotComment.purpose == "lessons",
        )
    ).first()


def _shown_in(row: BotComment | None, bullet_id: str) -> float | None:
    if row is None or not row.relevances or bullet_id not in (row.bullet_ids or []):
        return None
    at = row.bullet_ids.index(bullet_id)
    return float(row.relevances[at]) if at < len(row.relevances) else None


def packaged_relevance(session: Session, scope: str, shown: float | None) -> float | None:
    """The packaged model's estimate behind one ``shown`` with the scope's shift applied.

    The scope's fit needs the estimate before its own shift: fitting on shown values would
    learn only the change since the last fit and undo it at the next. The shift in force now
    is the one the comment was shown with unless a refit came in between (then it is close).
    """
    if shown is None:
        return None
    calibration = session.get(FitCalibration, scope)
    return shifted(shown, -calibration.shift) if calibration is not None else shown


def record(session: Session, verdict: Verdict, now: datetime | None = None) -> FitLabel | None:
    """Store a verdict, replacing the same person's earlier one; None for an unknown lesson.

    Never touches the lesson itself: fit for one ticket says nothing about its truth.
    """
    if verdict.source not in SOURCES:
        raise ValueError(f"source must be one of {', '.join(SOURCES)}")
    if session.get(Bullet, verdict.bullet_id) is None:
        return None
    now = now or clock.now()
    reason = (verdict.reason or "").strip()[:REASON_CHARS] or None
    # Everything is read before a new row is added: a query's autoflush would insert it half
    # filled.
    row = session.scalars(
        select(FitLabel).where(
            FitLabel.ticket_key == verdict.ticket_key,
            FitLabel.bullet_id == verdict.bullet_id,
            FitLabel.actor == verdict.actor,
            FitLabel.source == verdict.source,
        )
    ).first()
    scope = row.scope if row is not None else verdict.scope or ticket_scope(verdict.ticket_key)
    comment = _lessons_comment(session, verdict.target, verdict.ticket_key)
    # Reactions are read again and again: a verdict on a comment not edited since keeps the
    # estimate it was first recorded with (a refit since would otherwise move it).
    unchanged = (
        row is not None
        and row.relevance is not None
        and comment is not None
        and comment.updated_at <= row.at
    )
    estimate = packaged_relevance(session, scope, _shown_in(comment, verdict.bullet_id))
    if row is None:
        row = FitLabel(
            scope=scope,
            ticket_key=verdict.ticket_key,
            bullet_id=verdict.bullet_id,
            actor=verdict.actor,
            source=verdict.source,
        )
        session.add(row)
    row.helpful = verdict.helpful
    row.target = verdict.target
    row.reason = reason
    if not unchanged:
        row.relevance = estimate
    row.at = now
    session.flush()
    return row


def replace_reactions(
    session: Session,
    target: str,
    ticket_key: str,
    bullet_ids: Sequence[str],
    reactions: Mapping[str, bool],
    now: datetime | None = None,
    *,
    scope: str | None = None,
) -> int:
    """Make the ticket's reaction verdicts exactly ``reactions`` (actor: 👍 is True).

    A reaction is on the whole comment, so it is a verdict on every lesson the comment shows.
    A reaction taken back since the last read drops its verdicts; one unchanged keeps its row
    and its time. ``scope`` is the ticket's search scope when its settings file names one.
    Returns the rows written.
    """
    now = now or clock.now()
    known = set(session.scalars(select(Bullet.id).where(Bullet.id.in_(list(bullet_ids)))))
    shown = [b for b in dict.fromkeys(bullet_ids) if b in known]
    stale = delete(FitLabel).where(FitLabel.ticket_key == ticket_key, FitLabel.source == REACTION)
    if reactions:
        keep = (FitLabel.actor.in_(list(reactions))) & (FitLabel.bullet_id.in_(shown))
        stale = stale.where(~keep)
    session.execute(stale)
    held = {
        (row.actor, row.bullet_id): row.helpful
        for row in session.scalars(
            select(FitLabel).where(FitLabel.ticket_key == ticket_key, FitLabel.source == REACTION)
        )
    }
    written = 0
    for actor, helpful in sorted(reactions.items()):
        for bullet_id in shown:
            if held.get((actor, bullet_id)) == helpful:
                continue  # read again, unchanged: the verdict keeps the time it was given
            verdict = Verdict(ticket_key, bullet_id, helpful, REACTION, target, actor, scope=scope)
            if record(session, verdict, now) is not None:
                written += 1
    return written


def withdraw(session: Session, ticket_key: str, bullet_id: str, actor: str, source: str) -> bool:
    """Forget one person's verdict on one lesson for one ticket; whether there was one."""
    result = session.execute(
        delete(FitLabel).where(
            FitLabel.ticket_key == ticket_key,
            FitLabel.bullet_id == bullet_id,
            FitLabel.actor == actor,
            FitLabel.source == source,
        )
    )
    return bool(result.rowcount)

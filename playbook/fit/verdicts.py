"""A verdict said in a comment (`/playbook helpful|unhelpful pb-3`): stored, its scope refitted."""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.orm import Session

from playbook.errors import BulletNotFound
from playbook.fit import calibration, labels
from playbook.lessons import characters
from playbook.models import FitLabel


@dataclass(frozen=True)
class Noted:
    """What a reply can say of a verdict it took."""

    bullet_id: str
    helpful: bool
    scope: str
    reason: str | None
    # The bot's comment on the ticket showed the lesson with an estimate: the verdict is a
    # labelled pair the scope's calibration learns from. Else it is kept, and teaches nothing.
    shown: bool
    # The same person had said so (or the opposite) about this lesson and ticket before.
    replaced: bool


def reason_text(reason: str | None) -> str | None:
    """A reason as stored: visible characters only, one line, at most labels.REASON_CHARS."""
    words = characters.visible(reason or "").split()
    return " ".join(words)[: labels.REASON_CHARS].rstrip() or None


def note(session: Session, verdict: labels.Verdict, now: datetime | None = None) -> Noted:
    """Store ``verdict`` (replacing the person's earlier one), then refit its scope.

    BulletNotFound for an unknown lesson; the caller decides first whether it is in reach.
    Never touches the lesson: fit for one ticket says nothing about its truth.
    """
    cleaned = replace(verdict, reason=reason_text(verdict.reason))
    earlier = session.scalar(
        select(FitLabel.id).where(
            FitLabel.ticket_key == cleaned.ticket_key,
            FitLabel.bullet_id == cleaned.bullet_id,
            FitLabel.actor == cleaned.actor,
            FitLabel.source == cleaned.source,
        )
    )
    row = labels.record(session, cleaned, now)
    if row is None:
        raise BulletNotFound(cleaned.bullet_id)
    calibration.refit(session, row.scope, now)
    return Noted(
        bullet_id=row.bullet_id,
        helpful=row.helpful,
        scope=row.scope,
        reason=row.reason,
        shown=row.relevance is not None,
        replaced=earlier is not None,
    )

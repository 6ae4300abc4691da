"""The bot's own comments: reserved before they are posted, so each is posted exactly once.

Posting a comment is a side effect that can be half done: the POST may succeed upstream
and time out here, or the worker may be killed between the POST and recording its id. So
the row is reserved first (`posting`), the comment is posted or edited, and the id recorded
(`posted`). A reservation found still `posting` means an earlier attempt's outcome is
unknown, and the caller must look for that comment (by its hidden marker) before posting.
The reservation is also a lock: two deliveries for one ticket never post at once.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import select
from sqlalchemy.orm import Session

from playbook import clock, db
from playbook.models import BotComment

LESSONS = "lessons"


class Busy(Exception):
    """Another delivery is posting this comment right now; try again at ``until``."""

    def __init__(self, message: str, until: datetime) -> None:
        super().__init__(message)
        self.until = until


@dataclass(frozen=True)
class Reservation:
    """A claimed comment slot: what was posted before, and whether the last attempt is unknown."""

    id: int
    external_id: str | None
    body: str
    uncertain: bool


def reply_purpose(comment_id: str | int) -> str:
    """The purpose of the bot's answer to one command comment."""
    return f"reply:{comment_id}"


def marker(purpose: str, ticket_key: str) -> str:
    """The hidden text naming the bot, the comment's purpose and the ticket it belongs to."""
    return f"playbook-bot:{purpose} {ticket_key}"


def find(session: Session, target: str, ticket_key: str, purpose: str) -> BotComment | None:
    """The comment slot, if one was ever reserved."""
    return session.scalars(
        select(BotComment).where(
            BotComment.target == target,
            BotComment.ticket_key == ticket_key,
            BotComment.purpose == purpose,
        )
    ).first()


def reserve(
    session: Session, target: str, ticket_key: str, purpose: str, holder: str, ttl: timedelta
) -> Reservation:
    """Claim the comment slot for ``holder`` until ``ttl`` from now; Busy if another holds it."""
    now = clock.now()
    session.execute(
        db.conflict_insert(session, BotComment)
        .values(
            target=target,
            ticket_key=ticket_key,
            purpose=purpose,
            state="new",
            attempts=0,
            bullet_ids=[],
            body="",
            created_at=now,
            updated_at=now,
        )
        .on_conflict_do_nothing(index_elements=["target", "ticket_key", "purpose"])
    )
    row = session.scalars(
        select(BotComment)
        .where(
            BotComment.target == target,
            BotComment.ticket_key == ticket_key,
            BotComment.purpose == purpose,
        )
        .with_for_update()
    ).one()
    if (
        row.claimed_by not in (None, holder)
        and row.claimed_until is not None
        and row.claimed_until > now
    ):
        raise Busy(
            f"another delivery is writing the {purpose} comment on {ticket_key}", row.claimed_until
        )
    uncertain = row.state == "posting"
    row.state = "posting"
    row.claimed_by = holder
    row.claimed_until = now + ttl
    row.attempts += 1
    session.flush()
    return Reservation(row.id, row.external_id, row.body, uncertain)


def release(session: Session, reservation_id: int, holder: str, *, unchanged: bool = False) -> None:
    """Give the slot back without a new comment id.

    ``unchanged``: nothing was sent (the text was already there), so the slot is as it was
    before; otherwise the outcome of the attempt is unknown and it stays `posting`.
    """
    row = session.get(BotComment, reservation_id, with_for_update=True)
    if row is None or row.claimed_by != holder:
        return
    if unchanged:
        row.state = "posted" if row.external_id else "new"
    row.claimed_by = None
    row.claimed_until = None
    session.flush()


def record(
    session: Session,
    reservation_id: int,
    holder: str,
    external_id: str,
    body: str,
    bullet_ids: list[str] | None = None,
) -> BotComment:
    """Record the posted (or adopted, or edited) comment and release the slot."""
    row = session.get(BotComment, reservation_id, with_for_update=True)
    if row is None:
        raise LookupError(f"no comment slot {reservation_id}")
    row.state = "posted"
    row.external_id = external_id
    row.body = body
    if bullet_ids is not None:
        row.bullet_ids = bullet_ids
    row.updated_at = clock.now()
    if row.claimed_by == holder:
        row.claimed_by = None
        row.claimed_until = None
    session.flush()
    return row

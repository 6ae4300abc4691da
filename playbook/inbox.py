"""The webhook inbox: insert-if-absent on delivery id, leased claims, retries, dead letters."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import Select, or_, select, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

from playbook import clock
from playbook.errors import InvalidInput
from playbook.models import DELIVERY_STATUSES, Delivery

MAX_ERROR_CHARS = 4000

# Built once: this insert is the hot path of every webhook answer, and a Core insert on the
# table with bound values skips building and hashing a new statement per request.
_INSERT_IF_ABSENT = {
    dialect.__name__.rsplit(".", 1)[-1]: dialect.insert(Delivery.__table__)
    .on_conflict_do_nothing(index_elements=["source", "delivery_id"])
    .returning(Delivery.__table__.c.id)
    for dialect in (postgresql, sqlite)
}


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how soon a failed delivery is tried again before it is dead."""

    max_attempts: int = 5
    base_delay: timedelta = timedelta(seconds=10)
    max_delay: timedelta = timedelta(hours=1)

    def delay(self, attempts: int) -> timedelta:
        """Exponential backoff after the ``attempts``-th failed attempt."""
        return min(self.base_delay * (2 ** max(attempts - 1, 0)), self.max_delay)


def accept(
    session: Session,
    *,
    source: str,
    event: str,
    delivery_id: str,
    payload: str,
    action: str | None = None,
    headers: dict[str, str] | None = None,
    installation_id: int | None = None,
) -> bool:
    """Store a delivery unless its id is already in the inbox; True when it is new.

    ON CONFLICT DO NOTHING makes concurrent redeliveries of one id race-free on both
    databases: exactly one insert wins, the others see a duplicate.
    """
    now = clock.now()
    values = {
        "source": source,
        "event": event,
        "action": action,
        "delivery_id": delivery_id,
        "installation_id": installation_id,
        "headers": headers or {},
        "payload": payload,
        "received_at": now,
        "status": "pending",
        "attempts": 0,
        "next_attempt_at": now,
    }
    statement = _INSERT_IF_ABSENT[session.get_bind().dialect.name]
    return session.execute(statement, values).first() is not None


def _due(now: datetime) -> Select[tuple[int]]:
    return select(Delivery.id).where(
        Delivery.status.in_(("pending", "failed")),
        Delivery.next_attempt_at <= now,
        or_(Delivery.locked_until.is_(None), Delivery.locked_until < now),
    )


def claim(session: Session, worker: str, *, limit: int = 10, lease: timedelta) -> list[Delivery]:
    """Take up to ``limit`` due deliveries for ``worker`` until the lease ends.

    On PostgreSQL, FOR UPDATE SKIP LOCKED lets several workers claim at once without
    ever taking the same row; SQLite has one writer at a time, so the clause is moot there.
    A claim counts as an attempt, so a delivery that kills its worker every time ends dead.
    """
    now = clock.now()
    ids = list(
        session.scalars(
            _due(now).order_by(Delivery.id).limit(limit).with_for_update(skip_locked=True)
        )
    )
    if not ids:
        return []
    session.execute(
        update(Delivery)
        .where(Delivery.id.in_(ids))
        .values(locked_until=now + lease, locked_by=worker, attempts=Delivery.attempts + 1)
    )
    return list(session.scalars(select(Delivery).where(Delivery.id.in_(ids)).order_by(Delivery.id)))


def complete(session: Session, delivery_id: int) -> None:
    """Mark a claimed delivery done."""
    session.execute(
        update(Delivery)
        .where(Delivery.id == delivery_id)
        .values(status="done", processed_at=clock.now(), locked_until=None, locked_by=None)
    )


def fail(
    session: Session,
    delivery_id: int,
    error: str,
    *,
    retry: bool,
    policy: RetryPolicy,
) -> str:
    """Record a failed attempt: schedule a retry with backoff, or make the delivery dead."""
    delivery = session.get(Delivery, delivery_id)
    if delivery is None:
        raise InvalidInput(f"no delivery {delivery_id}")
    dead = not retry or delivery.attempts >= policy.max_attempts
    delivery.status = "dead" if dead else "failed"
    delivery.last_error = error[:MAX_ERROR_CHARS]
    delivery.locked_until = None
    delivery.locked_by = None
    if not dead:
        delivery.next_attempt_at = clock.now() + policy.delay(delivery.attempts)
    session.flush()
    return delivery.status


def get(session: Session, delivery_key: str) -> Delivery:
    """A delivery by inbox row id or by its sender's delivery id (GUID)."""
    query = select(Delivery).where(Delivery.delivery_id == delivery_key)
    if delivery_key.isdigit():
        query = select(Delivery).where(
            or_(Delivery.id == int(delivery_key), Delivery.delivery_id == delivery_key)
        )
    delivery = session.scalars(query.order_by(Delivery.id)).first()
    if delivery is None:
        raise InvalidInput(
            f"no delivery {delivery_key!r} in the inbox; `playbook-bot deliveries list` shows them"
        )
    return delivery


def listing(session: Session, status: str | None = None, limit: int = 50) -> list[Delivery]:
    """The newest deliveries, optionally only those in one status."""
    if status is not None and status not in DELIVERY_STATUSES:
        raise InvalidInput(f"status must be one of {', '.join(DELIVERY_STATUSES)}")
    query = select(Delivery).order_by(Delivery.id.desc()).limit(limit)
    if status is not None:
        query = query.where(Delivery.status == status)
    return list(session.scalars(query))


def replay(session: Session, deliveries: Sequence[Delivery]) -> int:
    """Queue deliveries again from a clean slate (attempts reset; the last error is kept)."""
    now = clock.now()
    for delivery in deliveries:
        delivery.status = "pending"
        delivery.attempts = 0
        delivery.next_attempt_at = now
        delivery.locked_until = None
        delivery.locked_by = None
    session.flush()
    return len(deliveries)


def replay_status(session: Session, status: str) -> int:
    """Queue every delivery in ``status`` (e.g. dead) again."""
    if status not in ("failed", "dead"):
        raise InvalidInput("only failed or dead deliveries can be replayed in bulk")
    return replay(session, list(session.scalars(select(Delivery).where(Delivery.status == status))))

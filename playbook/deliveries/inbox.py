"""The webhook inbox: insert-if-absent on delivery id, leased claims, retries, dead letters."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import ColumnElement, and_, bindparam, func, not_, or_, select, text, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

from playbook import clock
from playbook.deliveries import tickets
from playbook.errors import InvalidInput
from playbook.lessons import ids
from playbook.models import DELIVERY_STATUSES, ERROR_KINDS, Delivery

MAX_ERROR_CHARS = 4000
MAX_TRACE_CHARS = 20000

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
    ticket_key: str | None = None,
) -> bool:
    """Store a delivery unless its id is already in the inbox; True when it is new.

    ``ticket_key`` is the ticket it is about, as `tickets.ticket_key` tells it from the
    parsed payload (the receiver has it parsed already).

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
        # Checked again here, where every row is stored: a key that is not a ticket's (a NUL,
        # which PostgreSQL refuses in text) never reaches the table, whoever queued the row.
        "ticket_key": tickets.checked(ticket_key),
        "headers": headers or {},
        "payload": payload,
        "received_at": now,
        "status": "pending",
        "attempts": 0,
        "next_attempt_at": now,
    }
    statement = _INSERT_IF_ABSENT[session.get_bind().dialect.name]
    return session.execute(statement, values).first() is not None


# Model jobs are inbox rows of the bot's own (source "playbook", event "model.<purpose>") that a
# worker of their own claims: a model that is slow or down then holds up no webhook delivery.
JOB_SOURCE = "playbook"
MODEL_EVENT_PREFIX = "model."
QUEUES = ("deliveries", "model", "all")


def _queue(queue: str) -> tuple[ColumnElement[bool], ...]:
    """The rows a worker of ``queue`` claims: deliveries, model jobs, or all of them."""
    is_model = and_(Delivery.source == JOB_SOURCE, Delivery.event.like(f"{MODEL_EVENT_PREFIX}%"))
    if queue == "model":
        return (is_model,)
    if queue == "deliveries":
        return (not_(is_model),)
    return ()


def _due(now: datetime) -> tuple[ColumnElement[bool], ...]:
    """A delivery waiting for a worker: pending or failed, due, and nobody's lease on it."""
    return (
        Delivery.status.in_(("pending", "failed")),
        Delivery.next_attempt_at <= now,
        or_(Delivery.locked_until.is_(None), Delivery.locked_until < now),
    )


# What a delivery says when its worker stopped in the middle of its last allowed attempt.
STOPPED_MID_WAY = (
    "the worker handling the last allowed attempt stopped before it finished (killed, or it "
    "lost its lease); `playbook-bot deliveries replay` tries again"
)


def claim(
    session: Session,
    worker: str,
    *,
    limit: int = 10,
    lease: timedelta,
    max_attempts: int = RetryPolicy.max_attempts,
    queue: str = "all",
) -> list[Delivery]:
    """Take up to ``limit`` due deliveries of ``queue`` for ``worker`` until the lease ends.

    On PostgreSQL, FOR UPDATE SKIP LOCKED lets several workers claim at once without
    ever taking the same row; SQLite has one writer at a time, so the clause is moot there.
    A claim counts as an attempt, so a delivery that kills its worker every time ends dead:
    a row never goes past ``max_attempts``, and one whose last attempt never reported back
    is made dead here, with the reason.
    """
    now = clock.now()
    # The due rows in id order, as far as the batch goes (an index walk that stops early,
    # however long the queue): the exhausted ones among them are made dead, the rest claimed.
    rows = session.execute(
        select(Delivery.id, Delivery.attempts)
        .where(*_due(now), *_queue(queue))
        .order_by(Delivery.id)
        .limit(limit)
        .with_for_update(skip_locked=True)
    ).all()
    exhausted = [row_id for row_id, attempts in rows if attempts >= max_attempts]
    if exhausted:
        session.execute(
            update(Delivery)
            .where(Delivery.id.in_(exhausted))
            .values(
                status="dead",
                error_kind="unexpected",
                last_error=STOPPED_MID_WAY,
                locked_until=None,
                locked_by=None,
            )
        )
    ids = [row_id for row_id, attempts in rows if attempts < max_attempts]
    if not ids:
        return []
    # The claimed rows come back from the UPDATE itself: no second read of what was just written.
    claimed = session.scalars(
        update(Delivery)
        .where(Delivery.id.in_(ids))
        .values(locked_until=now + lease, locked_by=worker, attempts=Delivery.attempts + 1)
        .returning(Delivery),
        execution_options={"synchronize_session": False},
    ).all()
    return sorted(claimed, key=lambda delivery: delivery.id)


def renew(session: Session, ids: Collection[int], worker: str, lease: timedelta) -> set[int]:
    """Extend ``worker``'s lease on the rows ``ids``; returns the ids it still owns.

    A row another worker claimed after this one's lease ran out is no longer this
    worker's, and it must not act for that row any more.
    """
    if not ids:
        return set()
    # One statement: the rows still ours are the rows the update touched.
    return set(
        session.scalars(
            update(Delivery)
            .where(Delivery.id.in_(list(ids)), Delivery.locked_by == worker)
            .values(locked_until=clock.now() + lease)
            .returning(Delivery.id),
            execution_options={"synchronize_session": False},
        )
    )


_ASYNC_COMMIT = text("SET LOCAL synchronous_commit TO OFF")


def asynchronous_commit(session: Session) -> None:
    """Let this transaction's commit return before its log reaches the disk (PostgreSQL).

    Only for a worker's outcome writes (complete, fail, defer) and for logs written while
    handling a delivery that acted on nothing outside (a skipped comment, a search that found
    nothing): losing those with the outcome just runs the delivery again. Every other session
    sees the outcome at once, as with any commit; what changes is that a crash of the database
    server itself in the next fraction of a second can forget it. The delivery is then still leased
    to its worker, so it runs again when the lease ends, exactly as after a worker killed
    mid-delivery, which handlers are idempotent for. In exchange the worker stops waiting for
    a disk flush per delivery, the largest single cost of a delivery that posts nothing.
    SQLite has no such switch per transaction; there it is a no-op.
    """
    if session.get_bind().dialect.name == "postgresql":
        session.execute(_ASYNC_COMMIT)


def _owned(delivery_id: int, worker: str) -> Any:
    # Only the lease owner reports an outcome; a worker that lost its row reports nothing.
    return update(Delivery).where(Delivery.id == delivery_id, Delivery.locked_by == worker)


_ROWS = Delivery.__table__.c
# Built once, like the intake's insert: every delivery ends with this statement, and a Core
# update with bound values skips building and hashing an ORM statement each time.
_COMPLETE = (
    update(Delivery.__table__)
    .where(_ROWS.id == bindparam("row_id"), _ROWS.locked_by == bindparam("worker"))
    .values(
        status=bindparam("status"),
        reason=bindparam("reason"),
        processed_at=bindparam("processed_at"),
        locked_until=None,
        locked_by=None,
    )
)


def complete(
    session: Session,
    delivery_id: int,
    worker: str,
    *,
    status: str = "done",
    reason: str | None = None,
) -> bool:
    """Mark a claimed delivery done (or ignored, with why); False if ``worker`` lost it."""
    if status not in ("done", "ignored"):
        raise InvalidInput(f"a finished delivery is done or ignored, not {status!r}")
    result = session.execute(
        _COMPLETE,
        {
            "row_id": delivery_id,
            "worker": worker,
            "status": status,
            "reason": reason[:MAX_ERROR_CHARS] if reason else None,
            "processed_at": clock.now(),
        },
    )
    return result.rowcount == 1


def fail(
    session: Session,
    delivery_id: int,
    worker: str,
    error: str,
    *,
    kind: str,
    policy: RetryPolicy,
    trace: str | None = None,
) -> str | None:
    """Record a failed attempt: retry with backoff, or dead; None if ``worker`` lost the row.

    A permanent error is dead at once; any other is retried until ``policy.max_attempts``.
    """
    if kind not in ERROR_KINDS:
        raise InvalidInput(f"error kind must be one of {', '.join(ERROR_KINDS)}")
    attempts = session.scalar(
        select(Delivery.attempts).where(Delivery.id == delivery_id, Delivery.locked_by == worker)
    )
    if attempts is None:
        return None
    dead = kind == "permanent" or attempts >= policy.max_attempts
    values: dict[str, Any] = {
        "status": "dead" if dead else "failed",
        "error_kind": kind,
        "last_error": error[:MAX_ERROR_CHARS],
        "last_traceback": trace[-MAX_TRACE_CHARS:] if trace else None,
        "locked_until": None,
        "locked_by": None,
    }
    if not dead:
        values["next_attempt_at"] = clock.now() + policy.delay(attempts)
    session.execute(_owned(delivery_id, worker).values(**values))
    return values["status"]


def defer(session: Session, delivery_id: int, worker: str, until: datetime, reason: str) -> bool:
    """Put a delivery back until ``until`` without counting the attempt (rate limit, busy).

    Waiting for a rate limit's reset is not a failure of the delivery, so it never
    makes the delivery dead.
    """
    result = session.execute(
        _owned(delivery_id, worker).values(
            status="failed",
            error_kind="rate_limited",
            last_error=reason[:MAX_ERROR_CHARS],
            attempts=Delivery.attempts - 1,
            next_attempt_at=clock.to_utc(until),
            locked_until=None,
            locked_by=None,
        )
    )
    return result.rowcount == 1


def get(session: Session, delivery_key: str) -> Delivery:
    """A delivery by inbox row id or by its sender's delivery id (GUID)."""
    query = select(Delivery).where(Delivery.delivery_id == delivery_key)
    # A row id fits a signed 64-bit integer; longer digits can only be a sender's id.
    row_id = ids.number(delivery_key, max_digits=19)  # ASCII digits only
    if row_id is not None and row_id < 2**63:
        query = select(Delivery).where(
            or_(Delivery.id == row_id, Delivery.delivery_id == delivery_key)
        )
    delivery = session.scalars(query.order_by(Delivery.id)).first()
    if delivery is None:
        raise InvalidInput(
            f"no delivery {delivery_key!r} in the inbox; `playbook-bot deliveries list` shows them"
        )
    return delivery


def listing(
    session: Session, status: str | None = None, limit: int = 50, *, before: int | None = None
) -> list[Delivery]:
    """The newest deliveries, optionally only those in one status, or older than row ``before``."""
    if status is not None and status not in DELIVERY_STATUSES:
        raise InvalidInput(f"status must be one of {', '.join(DELIVERY_STATUSES)}")
    query = select(Delivery).order_by(Delivery.id.desc()).limit(limit)
    if status is not None:
        query = query.where(Delivery.status == status)
    if before is not None:
        query = query.where(Delivery.id < before)
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


def revive_dead(session: Session, source: str, delivery_id: str, payload: str) -> bool:
    """Queue a dead delivery again when its sender redelivers it as it was; True if it did.

    GitHub's "Redeliver" sends the same delivery id and body: after the cause is fixed (a
    permission granted, a setting set), that is what an operator clicks, and it should run
    again rather than be answered as a duplicate. A delivery that is not dead, or a body that
    differs from the one stored, is a duplicate as before.
    """
    row = session.scalar(
        select(Delivery)
        .where(Delivery.source == source, Delivery.delivery_id == delivery_id)
        .with_for_update()
    )
    if row is None or row.status != "dead" or row.payload != payload:
        return False
    replay(session, [row])
    return True


def known(session: Session, source: str, delivery_ids: Collection[str]) -> set[str]:
    """Which of these delivery ids of ``source`` are in the inbox already."""
    if not delivery_ids:
        return set()
    query = select(Delivery.delivery_id).where(
        Delivery.source == source, Delivery.delivery_id.in_(list(delivery_ids))
    )
    return set(session.scalars(query))


def enqueue(
    session: Session,
    *,
    source: str,
    event: str,
    delivery_id: str,
    payload: str,
    ticket_key: str | None = None,
) -> bool:
    """Queue work of the bot's own for the worker under a fixed delivery id (one per task).

    Stored new, or run again from a clean slate if it finished; False when it already waits
    for a worker (or a worker has it in hand), so asking twice queues it once.
    """
    if accept(
        session,
        source=source,
        event=event,
        delivery_id=delivery_id,
        payload=payload,
        ticket_key=ticket_key,
    ):
        return True
    row = session.scalars(
        select(Delivery).where(Delivery.source == source, Delivery.delivery_id == delivery_id)
    ).one()
    if row.status in ("pending", "failed"):
        return False
    row.payload = payload
    replay(session, [row])
    return True


def waiting(session: Session, source: str, delivery_ids: Collection[str]) -> set[str]:
    """Which of these delivery ids of ``source`` wait for a worker (pending, or failed and
    to be tried again)."""
    if not delivery_ids:
        return set()
    query = select(Delivery.delivery_id).where(
        Delivery.source == source,
        Delivery.delivery_id.in_(list(delivery_ids)),
        Delivery.status.in_(("pending", "failed")),
    )
    return set(session.scalars(query))


def replay_transient(session: Session, since: datetime) -> int:
    """Queue again the deliveries received since ``since`` that died of passing trouble."""
    dead = session.scalars(
        select(Delivery).where(
            Delivery.status == "dead",
            Delivery.error_kind == "transient",
            Delivery.received_at >= since,
        )
    )
    return replay(session, list(dead))


def replay_status(session: Session, status: str) -> int:
    """Queue every delivery in ``status`` (e.g. dead) again."""
    if status not in ("failed", "dead"):
        raise InvalidInput("only failed or dead deliveries can be replayed in bulk")
    return replay(session, list(session.scalars(select(Delivery).where(Delivery.status == status))))


@dataclass(frozen=True)
class QueueHealth:
    """How the inbox is doing: what waits, for how long, and what is dead."""

    due: int
    oldest_due_seconds: float | None
    dead: int


def health(session: Session) -> QueueHealth:
    """Counts for `/readyz` and operators: due deliveries, the oldest one's age, dead ones."""
    now = clock.now()
    due_filter = (Delivery.status.in_(("pending", "failed")), Delivery.next_attempt_at <= now)
    due, oldest = session.execute(
        select(func.count(), func.min(Delivery.next_attempt_at)).where(*due_filter)
    ).one()
    dead = session.scalar(select(func.count()).where(Delivery.status == "dead")) or 0
    age = (now - clock.to_utc(oldest)).total_seconds() if oldest is not None else None
    return QueueHealth(due=due, oldest_due_seconds=age, dead=dead)

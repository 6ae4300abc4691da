"""Worker heartbeats: each worker says it is alive, so readiness knows whether the inbox moves."""

from __future__ import annotations

from datetime import datetime, timedelta

from sqlalchemy import Engine, delete, func, select

from playbook import clock, db
from playbook.models import WorkerHeartbeat

# A worker's row is forgotten a day after its last beat, so restarts do not pile rows up.
FORGET_AFTER = timedelta(days=1)


def beat(engine: Engine, name: str, started_at: datetime) -> None:
    """Record that worker ``name`` is alive now."""
    now = clock.now()
    insert = db.conflict_insert(engine, WorkerHeartbeat).values(
        name=name, started_at=started_at, beat_at=now
    )
    with db.transaction(engine) as session:
        # One upsert, not an insert and an update: a beat is a single statement.
        session.execute(
            insert.on_conflict_do_update(index_elements=["name"], set_={"beat_at": now})
        )
        session.execute(delete(WorkerHeartbeat).where(WorkerHeartbeat.beat_at < now - FORGET_AFTER))


def stop(engine: Engine, name: str) -> None:
    """Forget a worker that stopped cleanly."""
    with db.transaction(engine) as session:
        session.execute(delete(WorkerHeartbeat).where(WorkerHeartbeat.name == name))


def fresh(engine: Engine, within: timedelta) -> tuple[int, datetime | None]:
    """How many workers beat within ``within``, and when the last beat of any worker was."""
    cutoff = clock.now() - within
    with db.transaction(engine) as session:
        count, last = session.execute(
            select(
                func.count().filter(WorkerHeartbeat.beat_at >= cutoff),
                func.max(WorkerHeartbeat.beat_at),
            )
        ).one()
    return count, clock.to_utc(last) if last is not None else None

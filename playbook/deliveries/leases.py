"""Leases: named locks with an expiry in the database, shared by every process."""

from __future__ import annotations

from datetime import timedelta

from sqlalchemy import Engine, or_, update

from playbook import clock, db
from playbook.models import Lease


def acquire(engine: Engine, name: str, holder: str, ttl: timedelta) -> bool:
    """Take or renew the lease ``name`` for ``ttl``; False while another holder has it.

    A holder that dies simply stops renewing, and the lease passes on when it expires.
    """
    now = clock.now()
    with db.transaction(engine) as session:
        session.execute(
            db.conflict_insert(engine, Lease)
            .values(name=name, holder=None, expires_at=now)
            .on_conflict_do_nothing(index_elements=["name"])
        )
        taken = session.execute(
            update(Lease)
            .where(
                Lease.name == name,
                or_(Lease.holder == holder, Lease.holder.is_(None), Lease.expires_at <= now),
            )
            .values(holder=holder, expires_at=now + ttl)
        )
        return taken.rowcount == 1


def release(engine: Engine, name: str, holder: str) -> None:
    """Give the lease back if ``holder`` has it."""
    with db.transaction(engine) as session:
        session.execute(
            update(Lease)
            .where(Lease.name == name, Lease.holder == holder)
            .values(holder=None, expires_at=clock.now())
        )

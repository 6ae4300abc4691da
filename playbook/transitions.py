"""Status transitions written as conditional updates: of two writers that read the same status,
only the first moves it; the other is told it lost, whatever the database's isolation level."""

from __future__ import annotations

import hashlib
from typing import Any

from sqlalchemy import inspect, text, update
from sqlalchemy.orm import Session

from playbook.errors import Conflict

__all__ = ["Conflict", "claim", "conflict", "exclusive", "require"]


def claim(session: Session, row: Any, expected: str, new: str) -> bool:
    """Move ``row``'s status from ``expected`` to ``new`` in the database, only if it still is
    ``expected`` there; False when another writer moved it first.

    The status a caller decided on was read earlier, and on PostgreSQL (read committed) twenty
    writers can all read "accepted" before any commits. ``UPDATE ... WHERE status = :expected``
    takes the row lock and re-checks the status on the newest committed row, so exactly one
    writer sees a row to update. SQLite opens every write transaction with BEGIN IMMEDIATE,
    so there the check always holds.
    """
    model = type(row)
    identity = inspect(row).identity
    if identity is None:  # added in this transaction: nobody else can see it yet
        return True
    keys = inspect(model).primary_key
    statement = update(model).where(
        *(column == value for column, value in zip(keys, identity, strict=True))
    )
    statement = statement.where(model.status == expected).values(status=new)
    # The ORM object is set by the caller (with its other fields); the identity map must not be
    # synchronised from this statement, which only guards and locks the row.
    with session.no_autoflush:
        result = session.execute(statement.execution_options(synchronize_session=False))
    return bool(result.rowcount == 1)  # type: ignore[attr-defined]


def require(session: Session, row: Any, expected: str, new: str, *, what: str) -> None:
    """`claim`, raising Conflict (a 409 at every door) when another writer got there first."""
    if not claim(session, row, expected, new):
        raise conflict(what, expected)


def conflict(what: str, expected: str) -> Conflict:
    """The error a writer gets when ``what`` is no longer ``expected``: one sentence saying
    what to do, the same at every door."""
    return Conflict(
        f"{what} changed while this request ran (it is no longer {expected}); "
        "look at it again and retry if still needed"
    )


def exclusive(session: Session, name: str) -> None:
    """Hold the lock called ``name`` until the caller's transaction ends: writers that first
    read whether something exists (a running experiment period) and then create it queue
    here, and each reads what the one before committed.

    PostgreSQL: a transaction-scoped advisory lock (no row to lock when nothing exists yet).
    SQLite opens every write transaction with BEGIN IMMEDIATE, which already serialises them.
    """
    if session.get_bind().dialect.name != "postgresql":
        return
    key = int.from_bytes(hashlib.sha256(name.encode("utf-8")).digest()[:8], "big", signed=True)
    session.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": key})

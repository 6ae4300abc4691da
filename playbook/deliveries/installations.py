"""GitHub App installations the bot knows, and the removed ones it no longer acts for."""

from __future__ import annotations

from collections.abc import Collection

from sqlalchemy import select
from sqlalchemy.orm import Session

from playbook import clock
from playbook.models import Installation


def record(session: Session, installation_id: int, account: str | None, status: str) -> None:
    """Remember an installation as active or deleted (suspended counts as deleted)."""
    row = session.get(Installation, installation_id)
    if row is None:
        row = Installation(id=installation_id, created_at=clock.now())
        session.add(row)
    row.account = account
    row.status = status
    row.deleted_at = clock.now() if status == "deleted" else None


def removed(session: Session, ids: Collection[int]) -> set[int]:
    """Which of ``ids`` were removed (or suspended)."""
    if not ids:
        return set()
    query = select(Installation.id).where(
        Installation.id.in_(list(ids)), Installation.status == "deleted"
    )
    return set(session.scalars(query))

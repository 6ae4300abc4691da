"""The playbook version: bumped by every write of lessons, read by every index to stay in sync."""

from __future__ import annotations

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from playbook.models import PlaybookMeta


def bump_version(session: Session) -> int:
    """Increase the playbook version that other processes compare to refresh their caches.

    The UPDATE also takes a row lock on PostgreSQL, which queues concurrent bullet
    writers; that is what makes `pb-<n>` allocation in `add` race-free.
    """
    session.execute(
        update(PlaybookMeta)
        .where(PlaybookMeta.key == "version")
        .values(value=PlaybookMeta.value + 1)
    )
    return playbook_version(session)


def playbook_version(session: Session) -> int:
    """The current playbook version (0 for a new playbook)."""
    return session.scalar(_VERSION) or 0


# Built once: every search asks, and building the statement costs more than running it.
_VERSION = select(PlaybookMeta.value).where(PlaybookMeta.key == "version")

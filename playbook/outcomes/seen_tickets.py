"""Tickets the bot has seen through verified deliveries: the only ones agent reports weigh on."""

from __future__ import annotations

from collections.abc import Iterable

from sqlalchemy import select
from sqlalchemy.orm import Session

from playbook import clock, db
from playbook.models import SeenTicket


def saw(session: Session, ticket_key: str, via: str) -> None:
    """Remember that a signed delivery was about ``ticket_key``; seeing it again adds nothing."""
    if not ticket_key:
        return
    # Insert-if-absent: two workers handling deliveries about one ticket both succeed.
    session.execute(
        db.conflict_insert(session, SeenTicket)
        .values(ticket_key=ticket_key, via=via, seen_at=clock.now())
        .on_conflict_do_nothing(index_elements=["ticket_key"])
    )


def seen(session: Session, ticket_keys: Iterable[str]) -> set[str]:
    """Those of ``ticket_keys`` the bot has seen."""
    keys = sorted({key for key in ticket_keys if key})
    found: set[str] = set()
    for start in range(0, len(keys), 500):
        chunk = keys[start : start + 500]
        found.update(
            session.scalars(select(SeenTicket.ticket_key).where(SeenTicket.ticket_key.in_(chunk)))
        )
    return found

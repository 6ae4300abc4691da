"""A small holdout experiment with hand-computed numbers, shared by the report's door tests.

On the ``seeded`` playbook (pb-1..pb-5), the experiment runs at 20% since 2026-03-01:

- shown arm, 30 tickets: S1..S10 shown pb-3 (acme/api), S1 merged and S2..S10 closed
  unmerged, assigned 2026-03-01; S11..S29 shown pb-1 and merged, S30 still open, assigned
  2026-03-05. 30 tickets, 29 with an outcome, 20 merged.
- held-out arm, 10 tickets: H1..H10 would have been shown pb-3, H1..H9 merged and H10 closed,
  assigned 2026-03-01. 10 tickets, 10 with an outcome, 9 merged.

pb-3 is measured harmful with a minimum of 5 tickets (1 of 10 merged against 9 of 10); pb-1
has no held-out side, so not enough data. 30 against 10 at 20% is no sample ratio mismatch.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from sqlalchemy import Engine
from sqlalchemy.orm import Session

from playbook.db import transaction
from playbook.experiment import assignment
from playbook.models import ExperimentAssignment, ExperimentExposure

STARTED = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)
FIRST_DAY = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
LATER = datetime(2026, 3, 5, 12, 0, tzinfo=UTC)
HARMFUL = "pb-3"
MIN_TICKETS = 5


def ticket(
    session: Session,
    key: str,
    arm: str,
    outcome: str | None,
    *,
    at: datetime,
    lessons: tuple[str, ...] = (),
    hours: float = 10.0,
    rounds: int = 0,
    percent: int = 20,
) -> None:
    """One ticket in the experiment with its outcome, and the lessons it was (or would be) shown."""
    session.add(
        ExperimentAssignment(
            ticket_key=key,
            arm=arm,
            percent=percent,
            assigned_at=at,
            ticket_ref=key,
            created_at=at,
            outcome=outcome,
            merged_at=at + timedelta(hours=hours) if outcome == "merged" else None,
            closed_unmerged=outcome == "closed",
            review_rounds=rounds,
        )
    )
    for rank, bullet_id in enumerate(lessons, start=1):
        session.add(
            ExperimentExposure(ticket_key=key, bullet_id=bullet_id, arm=arm, rank=rank, at=at)
        )


def build(engine: Engine) -> None:
    """The experiment described above, on a playbook that already has pb-1..pb-5."""
    with transaction(engine) as session:
        assignment.start(session, 20, STARTED, "cli:tester")
        for n in range(1, 11):
            outcome = "merged" if n == 1 else "closed"
            ticket(session, f"S-{n}", "shown", outcome, at=FIRST_DAY, lessons=(HARMFUL,))
        for n in range(11, 31):
            outcome = "open" if n == 30 else "merged"
            ticket(session, f"S-{n}", "shown", outcome, at=LATER, lessons=("pb-1",), rounds=1)
        for n in range(1, 11):
            outcome = "merged" if n <= 9 else "closed"
            ticket(session, f"H-{n}", "held_out", outcome, at=FIRST_DAY, lessons=(HARMFUL,))

"""The holdout at work: which tickets are in it, which arm each door sees, what it records.

Every door that shows lessons for a ticket asks here first. A ticket in the held-out arm gets
none, from any door; the lessons the bot would have shown it are kept as exposures of arm
``held_out``, apart from loads, so nothing but the experiment's report ever counts them.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.orm import Session

from playbook import clock, db
from playbook.experiment import assignment
from playbook.experiment.assignment import Arm, Assignment
from playbook.models import Bullet, ExperimentExposure, SeenTicket

# Who starts and stops periods that PLAYBOOK_HOLDOUT_PERCENT asked for.
SETTING = "setting"
HELD_OUT_REASON = (
    "this ticket is in the holdout experiment's held-out arm: it gets no lessons, so that "
    "what lessons change can be measured against it"
)


@dataclass(frozen=True)
class Config:
    """The experiment's settings: PLAYBOOK_HOLDOUT_PERCENT and PLAYBOOK_EXPERIMENT_SALT."""

    percent: int = 0
    salt: str | None = None


OFF = Config()


def percent_in_force(session: Session, config: Config, now: datetime) -> int:
    """The percentage the experiment runs at now (0: off), recording what the setting changed.

    The setting starts a period (by ``setting``) and a new value starts a new one; setting it
    to 0 stops a period the setting started. A period someone started from the command line or
    the API is theirs: the setting leaves it alone, and once someone stopped the experiment it
    stays stopped, whatever the setting says, until someone starts it again.
    """
    period = _period_in_force(session, config, now)
    return 0 if period is None else period.percent


def _period_in_force(session: Session, config: Config, now: datetime) -> assignment.Period | None:
    current = assignment.running(session)
    if current is not None and current.started_by != SETTING:
        return current
    if config.percent == 0:
        if current is not None:
            assignment.stop(session, now, SETTING)
        return None
    if current is None:
        last = _last_period(session)
        if last is not None and last.stopped_by not in (None, SETTING):
            return None
    if current is None or current.percent != config.percent:
        current = assignment.start(session, config.percent, now, SETTING)
    return current


def _last_period(session: Session) -> assignment.Period | None:
    every = assignment.periods(session)
    return every[-1] if every else None


def _outside(session: Session, ticket_ref: str, period: assignment.Period) -> bool:
    """Whether the ticket was first seen before ``period`` began (outside it for good)."""
    seen = session.scalars(
        select(SeenTicket.seen_at).where(SeenTicket.ticket_key == ticket_ref)
    ).first()
    return seen is not None and seen < period.started_at


def enroll(
    session: Session,
    config: Config,
    ticket_ref: str,
    *,
    now: datetime,
    created_at: datetime | None = None,
    percent: int | None = None,
) -> Assignment | None:
    """The arm of a ticket a verified delivery is about: stored the first time it is seen
    while the experiment runs, the stored one ever after; None when it is outside.

    Call before the delivery marks the ticket seen: a ticket the bot saw before the running
    period began stays outside, so turning the experiment on never moves a ticket that was
    already being shown lessons. ``percent`` is the ticket's repository's own share
    (`holdout_percent` in its settings file): it applies while a period runs, and 0 keeps
    the repository's tickets outside; a repository cannot start the experiment alone.
    """
    existing = assignment.assigned(session, ticket_ref)
    if existing is not None:
        return existing
    period = _period_in_force(session, config, now)
    if period is None or _outside(session, ticket_ref, period) or percent == 0:
        return None
    share = period.percent if percent is None else percent
    salt = assignment.salt(session, config.salt)
    # The bot's spelling of the key joins its links; the tracker's creation time (never
    # after now) starts the time to merge.
    return assignment.assign(
        session,
        ticket_ref,
        share,
        salt,
        now,
        ticket_ref=ticket_ref,
        created_at=min(created_at or now, now),
        known_new=True,
    )


def arm_for(
    session: Session,
    config: Config,
    ticket_ref: str | None,
    now: datetime,
    percent: int | None = None,
) -> Arm | None:
    """The arm a door must honour for a ticket it was named (an agent's search): the stored
    one, else the one the ticket will get while the experiment runs (computed, not stored:
    only verified deliveries enroll); None outside the experiment or without a ticket.
    """
    if not ticket_ref:
        return None
    existing = assignment.assigned(session, ticket_ref)
    if existing is not None:
        return existing.arm
    period = _period_in_force(session, config, now)
    if period is None or _outside(session, ticket_ref, period) or percent == 0:
        return None
    share = period.percent if percent is None else percent
    return assignment.arm(assignment.salt(session, config.salt), ticket_ref, share)


def record_exposures(
    session: Session,
    ticket_ref: str,
    arm: Arm,
    ranked: Iterable[tuple[str, int]],
    *,
    query_id: str | None,
    consumer: str | None,
    now: datetime,
) -> int:
    """Keep the lessons (id, rank) a ticket was shown or would have been, once per lesson.

    An edit that ranks new lessons adds them; those ranked before stay, as loads do, so both
    arms count a lesson on a ticket the same way. Returns how many were new.
    """
    key = assignment.canonical(ticket_ref)
    first: dict[str, int] = {}
    for bullet_id, rank in ranked:
        first.setdefault(bullet_id, rank)
    # Only lessons still in the playbook: a comment posted later may list a removed one.
    known = set(session.scalars(select(Bullet.id).where(Bullet.id.in_(list(first)))))
    rows = [
        {
            "ticket_key": key,
            "bullet_id": bullet_id,
            "arm": arm,
            "rank": rank,
            "query_id": query_id,
            "consumer": consumer,
            "at": now,
        }
        for bullet_id, rank in first.items()
        if bullet_id in known
    ]
    if not rows:
        return 0
    # RETURNING counts what was new on both databases (a multi-row insert's rowcount is not
    # always known).
    inserted = session.scalars(
        db.conflict_insert(session, ExperimentExposure)
        .values(rows)
        .on_conflict_do_nothing(index_elements=["ticket_key", "bullet_id"])
        .returning(ExperimentExposure.id)
    )
    return len(inserted.all())


def record_if_shown(
    session: Session,
    ticket_ref: str,
    ranked: Iterable[tuple[str, int]],
    query_id: str | None,
    consumer: str | None,
) -> int:
    """Mirror the loads of a ticket assigned to the shown arm as its shown exposures.

    Called wherever the bot records a ticket's loads (its comment, a comment posted later),
    so the experiment counts the lessons a shown ticket got without reading the usage log.
    """
    placed = assignment.assigned(session, ticket_ref)
    if placed is None or placed.arm != "shown":
        return 0
    return record_exposures(
        session,
        ticket_ref,
        "shown",
        ranked,
        query_id=query_id,
        consumer=consumer,
        now=clock.now(),
    )


def held_out(session: Session, ticket_ref: str) -> bool:
    """Whether the ticket is stored as held out (a kept comment must then never be posted)."""
    placed = assignment.assigned(session, ticket_ref)
    return placed is not None and placed.arm == "held_out"


def exposures(session: Session, ticket_ref: str) -> list[ExperimentExposure]:
    """The lessons a ticket was shown or would have been shown, best rank first."""
    return list(
        session.scalars(
            select(ExperimentExposure)
            .where(ExperimentExposure.ticket_key == assignment.canonical(ticket_ref))
            .order_by(ExperimentExposure.rank, ExperimentExposure.id)
        )
    )

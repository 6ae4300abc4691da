"""Which arm of the holdout a ticket is in, fixed when first seen; the salt; the periods run.

A ticket's arm is a keyed hash (HMAC-SHA256) of its canonical key: every redelivery, edit,
worker and door computes the same arm, and the first one stored is kept for good, with the
percentage in force then. Nothing here is wired into retrieval yet; with the percentage at 0
(the default) nothing is stored and every ticket is outside the experiment.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from sqlalchemy import select
from sqlalchemy.orm import Session

from playbook import clock, db, transitions
from playbook.models import ExperimentAssignment, ExperimentPeriod, ExperimentSalt

Arm = Literal["shown", "held_out"]

MAX_PERCENT = 50
# Buckets per percent point: a percentage with two decimals would still map exactly.
_BUCKETS = 10_000
_SALT_ROW = 1


@dataclass(frozen=True)
class Assignment:
    """A ticket's arm and the percentage in force when the experiment first saw it."""

    ticket_key: str
    arm: Arm
    percent: int
    assigned_at: datetime


@dataclass(frozen=True)
class Period:
    """One run of the experiment at one percentage; ``stopped_at`` is None while it runs."""

    id: int
    percent: int
    started_at: datetime
    started_by: str
    stopped_at: datetime | None
    stopped_by: str | None


def canonical(ticket_key: str) -> str:
    """The one spelling of a ticket key: ``owner/repo#12`` lower-cased, Jira's ``PB-12`` upper.

    GitHub owner and repository names are case-insensitive and Jira keys are upper-case
    wherever Jira shows them, so ``Acme/API#07`` and ``acme/api#7`` are the same ticket and
    must land in the same arm.
    """
    key = ticket_key.strip()
    github = _github_key(key)
    if github:
        return f"{github[0].lower()}#{github[1]}"
    return key.upper()


def _github_key(key: str) -> tuple[str, int] | None:
    """``owner/repo#12`` as (``owner/repo``, 12); None for any other shape.

    String code, not ``[^#\\s]+/[^#\\s]+#[0-9]+``: that pattern tries every "/" of a long
    key without a "#" against the rest of it, quadratic in the key's length.
    """
    repo, hash_sign, number = key.partition("#")
    slash = repo.find("/", 1)
    if (
        not hash_sign
        or not number.isascii()
        or not number.isdigit()
        or slash == -1
        or slash == len(repo) - 1
        or any(character.isspace() for character in repo)
    ):
        return None
    return repo, int(number)


def _checked(percent: int) -> int:
    if not 0 <= percent <= MAX_PERCENT:
        raise ValueError(f"holdout percent must be 0 to {MAX_PERCENT}, not {percent}")
    return percent


def arm(salt: bytes, ticket_key: str, percent: int) -> Arm:
    """The arm of ``ticket_key``: held out when its keyed hash falls in the first ``percent``%.

    HMAC-SHA256 under a secret salt is a pseudo-random function: without the salt its output
    for any key cannot be told from chance, so nobody can pick a key (open issues until one
    lands "shown") or predict a ticket's arm, as they could with a plain hash of the key.
    """
    digest = hmac.new(salt, canonical(ticket_key).encode(), hashlib.sha256).digest()
    # 64 bits modulo 10,000: the bias is below 1e-15, nothing a report could see.
    bucket = int.from_bytes(digest[:8], "big") % _BUCKETS
    return "held_out" if bucket < _checked(percent) * (_BUCKETS // 100) else "shown"


def salt(session: Session, configured: str | None) -> bytes:
    """The experiment's salt: PLAYBOOK_EXPERIMENT_SALT, else the one stored on first use."""
    if configured:
        return configured.encode()
    stored = session.get(ExperimentSalt, _SALT_ROW)
    if stored is not None:
        return stored.value
    # Two processes may both find none: each inserts if absent and reads back whichever
    # insert won, so both use the same salt (PostgreSQL waits on the other's uncommitted
    # row; SQLite's BEGIN IMMEDIATE runs the two one after the other).
    session.execute(
        db.conflict_insert(session, ExperimentSalt)
        .values(id=_SALT_ROW, value=secrets.token_bytes(32), created_at=clock.now())
        .on_conflict_do_nothing(index_elements=["id"])
    )
    return session.scalars(select(ExperimentSalt.value).where(ExperimentSalt.id == _SALT_ROW)).one()


# Columns, not entities: these run on every issue delivery, and the ORM's identity loading
# costs more than the lookups themselves.
_ASSIGNMENT = (
    ExperimentAssignment.ticket_key,
    ExperimentAssignment.arm,
    ExperimentAssignment.percent,
    ExperimentAssignment.assigned_at,
)


def _assignment(row: Any) -> Assignment:
    return Assignment(row.ticket_key, row.arm, row.percent, clock.to_utc(row.assigned_at))


def assigned(session: Session, ticket_key: str) -> Assignment | None:
    """The stored assignment of ``ticket_key``, or None if the experiment never saw it."""
    row = session.execute(
        select(*_ASSIGNMENT).where(ExperimentAssignment.ticket_key == canonical(ticket_key))
    ).first()
    return None if row is None else _assignment(row)


def assign(
    session: Session,
    ticket_key: str,
    percent: int,
    salt: bytes,
    now: datetime,
    *,
    ticket_ref: str | None = None,
    created_at: datetime | None = None,
    known_new: bool = False,
) -> Assignment | None:
    """The ticket's assignment: stored the first time it is seen with the experiment on,
    the stored one ever after (a later percentage never moves it); None while it is off and
    the ticket was never assigned (outside the experiment: nothing is stored).

    ``ticket_ref`` (the key as the bot's other tables spell it) and ``created_at`` (the
    tracker's creation time) are stored with a new assignment. ``known_new``: the caller has
    just found none stored, so it is not looked up again first.
    """
    key = canonical(ticket_key)
    existing = None if known_new else assigned(session, key)
    if existing is not None or _checked(percent) == 0:
        return existing
    # Insert-if-absent: two workers racing on one ticket keep the first row (they compute
    # the same arm; only a percentage changed between them could differ). The winner reads
    # its row back from RETURNING; the other finds the winner's.
    row = session.execute(
        db.conflict_insert(session, ExperimentAssignment)
        .values(
            ticket_key=key,
            arm=arm(salt, key, percent),
            percent=percent,
            assigned_at=now,
            ticket_ref=ticket_ref,
            created_at=created_at,
        )
        .on_conflict_do_nothing(index_elements=["ticket_key"])
        .returning(*_ASSIGNMENT)
    ).first()
    return _assignment(row) if row is not None else assigned(session, key)


def _period(row: Any) -> Period:
    stopped = None if row.stopped_at is None else clock.to_utc(row.stopped_at)
    return Period(
        row.id, row.percent, clock.to_utc(row.started_at), row.started_by, stopped, row.stopped_by
    )


_PERIOD = (
    ExperimentPeriod.id,
    ExperimentPeriod.percent,
    ExperimentPeriod.started_at,
    ExperimentPeriod.started_by,
    ExperimentPeriod.stopped_at,
    ExperimentPeriod.stopped_by,
)


# Starting and stopping the experiment read the running period, then write: one at a time.
PERIODS_LOCK = "experiment periods"


def running(session: Session) -> Period | None:
    """The period running now, or None when the experiment is stopped."""
    row = session.execute(
        select(*_PERIOD)
        .where(ExperimentPeriod.stopped_at.is_(None))
        .order_by(ExperimentPeriod.id.desc())
        .limit(1)
    ).first()
    return None if row is None else _period(row)


def start(session: Session, percent: int, now: datetime, actor: str) -> Period:
    """Run the experiment at ``percent`` from ``now``; a running period at another percentage
    is stopped first, so each period has one percentage (starting it again changes nothing)."""
    if _checked(percent) == 0:
        raise ValueError("holdout percent 0 is no experiment: stop it instead")
    # Twenty concurrent starts must leave one running period, not twenty.
    transitions.exclusive(session, PERIODS_LOCK)
    current = running(session)
    if current is not None and current.percent == percent:
        return current
    if current is not None:
        stop(session, now, actor)
    row = ExperimentPeriod(percent=percent, started_at=now, started_by=actor)
    session.add(row)
    session.flush()
    return _period(row)


def stop(session: Session, now: datetime, actor: str) -> Period | None:
    """Stop the running period at ``now``; None when none was running."""
    transitions.exclusive(session, PERIODS_LOCK)
    rows = session.scalars(
        select(ExperimentPeriod).where(ExperimentPeriod.stopped_at.is_(None))
    ).all()
    for row in rows:
        row.stopped_at, row.stopped_by = now, actor
    session.flush()
    return _period(rows[-1]) if rows else None


def periods(session: Session) -> list[Period]:
    """Every period the experiment ran, oldest first."""
    rows = session.scalars(
        select(ExperimentPeriod).order_by(ExperimentPeriod.started_at, ExperimentPeriod.id)
    )
    return [_period(row) for row in rows]

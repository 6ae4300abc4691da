"""Concurrent starts and stops of the experiment leave one running period (or none), never many."""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import Engine, func, select

from playbook.db import transaction
from playbook.experiment import assignment
from playbook.models import ExperimentPeriod
from tests.racing import race

N = 20
T0 = datetime(2026, 11, 20, 9, 0, tzinfo=UTC)


def _counts(engine: Engine) -> tuple[int, int]:
    with transaction(engine) as session:
        total = session.scalar(select(func.count()).select_from(ExperimentPeriod))
        open_ = session.scalar(
            select(func.count())
            .select_from(ExperimentPeriod)
            .where(ExperimentPeriod.stopped_at.is_(None))
        )
    return total or 0, open_ or 0


def test_twenty_concurrent_starts_at_one_percent_make_one_period(engine: Engine) -> None:
    def one(i: int) -> int:
        with transaction(engine) as session:
            return assignment.start(session, 10, T0, f"u{i}").id

    results = race(N, one)
    assert not [r for r in results if isinstance(r, Exception)], results
    assert len(set(results)) == 1
    assert _counts(engine) == (1, 1)


def test_concurrent_starts_at_several_percents_leave_one_running(engine: Engine) -> None:
    def one(i: int) -> int:
        with transaction(engine) as session:
            return assignment.start(session, 5 + i % 4, T0, f"u{i}").percent

    results = race(N, one)
    assert not [r for r in results if isinstance(r, Exception)], results
    total, running = _counts(engine)
    assert running == 1 and total <= N


def test_concurrent_stops_and_starts_never_leave_two_running(engine: Engine) -> None:
    with transaction(engine) as session:
        assignment.start(session, 10, T0, "t")

    def one(i: int) -> object:
        with transaction(engine) as session:
            if i % 2:
                return assignment.stop(session, T0, f"u{i}")
            return assignment.start(session, 20, T0, f"u{i}")

    results = race(N, one)
    assert not [r for r in results if isinstance(r, Exception)], results
    assert _counts(engine)[1] <= 1

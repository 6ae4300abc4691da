"""Leases and the schedule: one process leads, and a job never runs twice at once."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import Engine

from bot.config import Settings
from bot.scheduler import run_exclusively, start
from playbook import clock
from playbook.deliveries import leases
from tests.bot import scheduler_process
from tests.bot.processes import Child, finish, go, ready, start_process

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def test_a_lease_has_one_holder_until_it_expires(engine: Engine) -> None:
    ttl = timedelta(minutes=2)
    with clock.frozen(T0):
        assert leases.acquire(engine, "scheduler", "a", ttl)
        assert not leases.acquire(engine, "scheduler", "b", ttl)
        assert leases.acquire(engine, "scheduler", "a", ttl)  # renewal
    with clock.frozen(T0 + timedelta(minutes=1)):
        assert not leases.acquire(engine, "scheduler", "b", ttl)
    with clock.frozen(T0 + timedelta(minutes=3)):  # a died and stopped renewing
        assert leases.acquire(engine, "scheduler", "b", ttl)
        assert not leases.acquire(engine, "scheduler", "a", ttl)
        leases.release(engine, "scheduler", "b")
        assert leases.acquire(engine, "scheduler", "a", ttl)


def test_only_the_leader_runs_jobs(engine: Engine) -> None:
    ran: list[str] = []
    assert run_exclusively(engine, "prune", "leader", lambda: ran.append("leader"))
    assert not run_exclusively(engine, "prune", "follower", lambda: ran.append("follower"))
    assert ran == ["leader"]


def test_a_job_still_running_is_not_started_by_a_new_leader(engine: Engine) -> None:
    nested: list[bool] = []

    def long_job() -> None:
        # The run outlives the leader lease; another process takes over the schedule...
        with clock.frozen(T0 + timedelta(minutes=5)):
            nested.append(run_exclusively(engine, "prune", "new-leader", lambda: None))

    with clock.frozen(T0):
        assert run_exclusively(engine, "prune", "old-leader", long_job)
    assert nested == [False]  # ...but the job lease keeps it from starting the same job
    with clock.frozen(T0 + timedelta(minutes=6)):
        assert run_exclusively(engine, "prune", "new-leader", lambda: None)


def _start_pair(database_url: str, log_file: Path, *extra: str) -> list[Child]:
    """Start two processes running the job loop; each waits for the word once ready."""
    return [
        start_process(scheduler_process.run, database_url, str(log_file), "25", *extra)
        for _ in range(2)
    ]


def _go_together(processes: list[Child]) -> None:
    """Once every process is ready, let them all begin at the same moment: otherwise the first
    could finish its rounds before the second starts, and a broken lock would go unseen."""
    ready(*processes)
    go(*processes)
    finish(*processes)


def _runs(log_file: Path) -> list[tuple[float, float]]:
    """The runs a pair logged, in start order."""
    rows = (line.split() for line in log_file.read_text().splitlines())
    return sorted((float(start), float(end)) for _holder, start, end in rows)


def _overlaps(runs: list[tuple[float, float]]) -> int:
    return sum(b[0] < a[1] for a, b in itertools.pairwise(runs))


@pytest.mark.slow
def test_two_processes_never_run_the_same_job_at_once(
    engine: Engine, database_url: str, tmp_path: Path
) -> None:
    locked, unlocked = tmp_path / "runs.txt", tmp_path / "unlocked.txt"
    # The same two processes without the lock, run beside them (they use no lease), must
    # overlap: the check on the locked pair can fail.
    _go_together(
        _start_pair(database_url, locked) + _start_pair(database_url, unlocked, "unlocked")
    )
    runs = _runs(locked)
    assert len(runs) >= 10
    assert _overlaps(runs) == 0, "two runs of the job overlapped"
    assert _overlaps(_runs(unlocked)) > 0


def test_scheduler_registers_the_upkeep_jobs(engine: Engine, database_url: str) -> None:
    settings = Settings(
        _env_file=None,
        PLAYBOOK_DATABASE_URL=database_url,
        PLAYBOOK_PRUNE_SCHEDULE="15 4 * * *",
        PLAYBOOK_REACTIONS_SCHEDULE="*/20 * * * *",
    )
    scheduler = start(engine, settings, holder="test")
    assert scheduler is not None
    try:
        jobs = {job.id: job for job in scheduler.get_jobs()}
        assert set(jobs) == {
            "prune",
            "reconcile",
            "retry",
            "purge",
            "agents_md",
            "consolidate",
            "reactions",
        }
        assert (
            str(jobs["prune"].trigger)
            == "cron[month='*', day='*', day_of_week='*', hour='4', minute='15']"
        )
        assert "minute='*/20'" in str(jobs["reactions"].trigger)
    finally:
        scheduler.shutdown(wait=False)
    assert start(engine, settings.model_copy(update={"scheduler_enabled": False})) is None


def test_bad_crontab_setting_is_named() -> None:
    import pytest
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="not a crontab expression"):
        Settings(_env_file=None, PLAYBOOK_PRUNE_SCHEDULE="every day")

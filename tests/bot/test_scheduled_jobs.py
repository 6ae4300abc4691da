"""The scheduled jobs (bot.scheduler.JOBS): what the prune, retry and purge job bodies do
when they run, that each job has a setting, and the `prune` command they share.

When and where the jobs run (the lock, the processes) is tests/bot/test_scheduler.py."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from sqlalchemy import Engine, select, update

from bot.config import Settings
from bot.scheduler import JOBS, prune_job, purge_job, retry_job
from playbook import clock
from playbook.db import transaction
from playbook.lessons import lifecycle
from playbook.models import Bullet, Delivery
from playbook.outcomes import usage
from tests.support import put


def _lesson(engine: Engine, text: str) -> str:
    with transaction(engine) as session:
        return lifecycle.add(session, text, learned_from="CTMS-1", actor="seed").bullet.id


def _settings(database_url: str, **values: Any) -> Settings:
    return Settings(_env_file=None, PLAYBOOK_DATABASE_URL=database_url, **values)


def test_the_prune_job_reports_and_archives_only_when_told(
    engine: Engine, database_url: str
) -> None:
    start = clock.now()
    with clock.frozen(start - timedelta(days=90)):
        idle = _lesson(engine, "A lesson nobody used in three months")
    with clock.frozen(start - timedelta(days=89)), transaction(engine) as session:
        # The usage log must span the observation window before anything is pruned.
        used = lifecycle.add(session, "A lesson in use", learned_from="X-1", actor="t").bullet.id
        usage.record_once(session, "loaded", [used], ticket_key="X-2")
    with clock.frozen(start - timedelta(days=1)), transaction(engine) as session:
        usage.record_once(session, "loaded", [used], ticket_key="X-3")
    prune_job(engine, _settings(database_url))
    with transaction(engine) as session:
        assert session.get(Bullet, idle).status == "active"  # type: ignore[union-attr]
    prune_job(engine, _settings(database_url, PLAYBOOK_PRUNE_APPLY=True))
    with transaction(engine) as session:
        assert session.get(Bullet, idle).status == "archived"  # type: ignore[union-attr]
        assert session.get(Bullet, used).status == "active"  # type: ignore[union-attr]
        revision = lifecycle.history(session, idle)[-1]
        assert (revision.action, revision.actor) == ("archive", "scheduler")


def test_the_retry_job_replays_only_recent_transient_deaths(
    engine: Engine, database_url: str
) -> None:
    rows = {
        "transient": put(engine, "{}"),
        "permanent": put(engine, "{}"),
        "old": put(engine, "{}"),
    }
    with transaction(engine) as session:
        for name, row in rows.items():
            session.execute(
                update(Delivery)
                .where(Delivery.id == row)
                .values(
                    status="dead",
                    attempts=5,
                    error_kind="permanent" if name == "permanent" else "transient",
                    received_at=clock.now() - timedelta(days=5 if name == "old" else 0),
                )
            )
    retry_job(engine, _settings(database_url))
    with transaction(engine) as session:
        status = {name: session.get(Delivery, row).status for name, row in rows.items()}  # type: ignore[union-attr]
    assert status == {"transient": "pending", "permanent": "dead", "old": "dead"}


def test_the_purge_job_deletes_only_finished_old_rows(engine: Engine, database_url: str) -> None:
    old, pending, recent = put(engine, "{}"), put(engine, "{}"), put(engine, "{}")
    with transaction(engine) as session:
        for row, status, days in ((old, "done", 40), (pending, "pending", 40), (recent, "done", 1)):
            session.execute(
                update(Delivery)
                .where(Delivery.id == row)
                .values(status=status, received_at=clock.now() - timedelta(days=days))
            )
    purge_job(engine, _settings(database_url, PLAYBOOK_RETENTION_DAYS=30))
    with transaction(engine) as session:
        left = set(session.scalars(select(Delivery.id)))
    assert left == {pending, recent}


def test_every_scheduled_job_has_a_setting_and_a_body() -> None:
    assert set(JOBS) == {
        "prune",
        "reconcile",
        "retry",
        "purge",
        "agents_md",
        "rate_backfill",
        "consolidate",
        "embed_backfill",
        "reactions",
    }
    for setting, body in JOBS.values():
        assert setting in Settings.model_fields and callable(body)


def test_the_agents_md_job_without_github_does_nothing(engine: Engine, database_url: str) -> None:
    # What it does with GitHub: tests/bot/test_agents_md_sync.py (sync_all).
    JOBS["agents_md"][1](engine, _settings(database_url))


def test_the_prune_command_dry_run_apply_and_markdown(cli: Any, engine: Engine) -> None:
    start = clock.now()
    with clock.frozen(start - timedelta(days=90)):
        idle = _lesson(engine, "A lesson nobody used in three months")
    with clock.frozen(start - timedelta(days=89)), transaction(engine) as session:
        usage.record_once(session, "loaded", [idle], ticket_key="X-2")
    dry = cli("prune", "--idle-days", "30")
    assert dry.exit_code == 0, dry.output
    assert idle in dry.output and "--apply" in dry.output
    with transaction(engine) as session:
        assert session.get(Bullet, idle).status == "active"  # type: ignore[union-attr]
    markdown = cli("prune", "--idle-days", "30", "--markdown")
    assert markdown.output.startswith("## Playbook prune (dry run)")
    applied = cli("prune", "--idle-days", "30", "--apply")
    assert applied.exit_code == 0, applied.output
    with transaction(engine) as session:
        assert session.get(Bullet, idle).status == "archived"  # type: ignore[union-attr]
    bad = cli("prune", "--idle-days", "0")
    assert bad.exit_code == 2

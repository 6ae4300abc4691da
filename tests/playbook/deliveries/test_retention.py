"""Retention: old finished deliveries and logs are purged; the playbook and its history are kept."""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import Engine, func, select, update

from bot.config import Settings
from bot.scheduler import JOBS, purge_job, start
from playbook import clock, db
from playbook.deliveries import inbox, retention
from playbook.errors import InvalidInput
from playbook.lessons import lifecycle
from playbook.models import (
    Base,
    BotComment,
    Delivery,
    Installation,
    Lease,
    PullRequest,
    Retrieval,
    SideEffect,
    TicketLink,
)
from playbook.outcomes import usage

NOW = datetime(2026, 3, 1, 12, tzinfo=UTC)
OLD = NOW - timedelta(days=40)
RECENT = NOW - timedelta(days=10)
PURGED = {Delivery.__tablename__, SideEffect.__tablename__, Retrieval.__tablename__}

# (delivery id, status, received at): the old finished ones are the three the purge removes.
DELIVERIES = [
    ("old-done", "done", OLD),
    ("old-ignored", "ignored", OLD),
    ("old-dead", "dead", OLD),
    ("old-pending", "pending", OLD),
    ("old-failed", "failed", OLD),
    ("recent-done", "done", RECENT),
    ("recent-dead", "dead", RECENT),
    ("recent-pending", "pending", RECENT),
]
LESSONS = {
    "old": "Retry webhook calls with an idempotency key",
    "recent": "Never hold a database lock across an HTTP request",
}
KEPT_DELIVERIES = {"old-pending", "old-failed", "recent-done", "recent-dead", "recent-pending"}


def _seed(engine: Engine) -> None:
    for delivery_id, status, at in DELIVERIES:
        with clock.frozen(at), db.transaction(engine) as session:
            inbox.accept(
                session, source="github", event="issues", delivery_id=delivery_id, payload="{}"
            )
            session.execute(
                update(Delivery).where(Delivery.delivery_id == delivery_id).values(status=status)
            )
    for at in (OLD, RECENT):
        with clock.frozen(at), db.transaction(engine) as session:
            tag = "old" if at == OLD else "recent"
            text = LESSONS[tag]
            bullet = lifecycle.add(session, text, learned_from="CTMS-1", actor="t").bullet
            lifecycle.archive(session, bullet.id, reason="test", actor="t")
            lifecycle.restore(session, bullet.id, actor="t")
            usage.record(session, "loaded", [bullet.id], ticket_key="CTMS-2", query_id=tag)
            usage.record(session, "cited", [bullet.id], ticket_key="CTMS-2", success=True)
            for _ in range(2):
                session.add(
                    SideEffect(
                        delivery_id=f"{tag}-done",
                        target="github",
                        action="comment",
                        ticket_key="o/r#1",
                        status="done",
                        at=at,
                    )
                )
            session.add(
                Retrieval(
                    ticket_key="CTMS-2", query_id=tag, rank_by="bm25", bullet_ids=[bullet.id], at=at
                )
            )
    # Old rows of every table the purge must never touch.
    with db.transaction(engine) as session:
        session.add(PullRequest(key="o/r#1", repo="o/r", number=1, updated_at=OLD))
        session.flush()
        session.add(TicketLink(ticket_key="CTMS-2", pr_key="o/r#1", kind="jira", created_at=OLD))
        session.add(BotComment(target="github", ticket_key="o/r#1", created_at=OLD, updated_at=OLD))
        session.add(Installation(id=7, account="o", created_at=OLD))
        session.add(Lease(name="job:old", holder="h", expires_at=OLD))


def _counts(engine: Engine) -> dict[str, int]:
    with engine.connect() as connection:
        return {
            table.name: connection.scalar(select(func.count()).select_from(table)) or 0
            for table in Base.metadata.sorted_tables
        }


def _delivery_ids(engine: Engine) -> set[str]:
    with engine.connect() as connection:
        return set(connection.scalars(select(Delivery.delivery_id)))


def _assert_purged(engine: Engine, before: dict[str, int]) -> None:
    after = _counts(engine)
    assert _delivery_ids(engine) == KEPT_DELIVERIES
    with engine.connect() as connection:
        assert set(connection.scalars(select(SideEffect.at))) == {RECENT}
        assert list(connection.scalars(select(Retrieval.query_id))) == ["recent"]
    assert after[SideEffect.__tablename__] == 2
    # Bullets, revisions, usage events and everything else: the same rows as before.
    assert {k: v for k, v in after.items() if k not in PURGED} == {
        k: v for k, v in before.items() if k not in PURGED
    }
    assert after["bullets"] == 2 and after["usage_events"] == 4 and after["revisions"] == 6


def test_purge_deletes_only_old_finished_deliveries_and_logs(engine: Engine) -> None:
    _seed(engine)
    before = _counts(engine)
    with clock.frozen(NOW), db.transaction(engine) as session:
        report = retention.purge(session, older_than=timedelta(days=30))
    assert (report.deliveries, report.side_effects, report.retrievals) == (3, 2, 1)
    assert report.cutoff == NOW - timedelta(days=30) and not report.dry_run
    _assert_purged(engine, before)
    with clock.frozen(NOW), db.transaction(engine) as session:  # nothing left to do
        assert retention.purge(session, older_than=timedelta(days=30)).total == 0


def test_dry_run_deletes_nothing_and_counts_the_same(engine: Engine) -> None:
    _seed(engine)
    before = _counts(engine)
    with clock.frozen(NOW), db.transaction(engine) as session:
        dry = retention.purge(session, older_than=timedelta(days=30), dry_run=True)
    assert dry.dry_run and _counts(engine) == before
    with clock.frozen(NOW), db.transaction(engine) as session:
        real = retention.purge(session, older_than=timedelta(days=30))
    assert (dry.deliveries, dry.side_effects, dry.retrievals) == (
        real.deliveries,
        real.side_effects,
        real.retrievals,
    )


def test_the_cutoff_is_exclusive(engine: Engine) -> None:
    _seed(engine)
    # Exactly 40 days is the old rows' age: they are not older than it, so they stay.
    with clock.frozen(NOW), db.transaction(engine) as session:
        assert retention.purge(session, older_than=timedelta(days=40)).total == 0
    with clock.frozen(NOW + timedelta(seconds=1)), db.transaction(engine) as session:
        assert retention.purge(session, older_than=timedelta(days=40)).total == 6


@pytest.mark.parametrize("span", [timedelta(days=1), timedelta(days=3) - timedelta(seconds=1)])
def test_a_cutoff_inside_githubs_redelivery_window_is_refused(
    engine: Engine, span: timedelta
) -> None:
    _seed(engine)
    with pytest.raises(InvalidInput, match="redeliver"), db.transaction(engine) as session:
        retention.purge(session, older_than=span)
    with clock.frozen(NOW), db.transaction(engine) as session:  # exactly 3 days is allowed
        assert retention.purge(session, older_than=timedelta(days=3)).deliveries == 5


def test_cli_purges_and_prints_one_line(engine: Engine, cli) -> None:
    _seed(engine)
    before = _counts(engine)
    clock.set_clock(lambda: NOW)
    result = cli("purge", "--dry-run")
    assert result.exit_code == 0, result.output
    assert result.output == (
        "would delete 3 finished deliveries, 2 side-effect records, 1 retrieval logs "
        "older than 30 days\n"
    )
    assert _counts(engine) == before
    result = cli("purge", "--older-than", "30d")
    assert result.exit_code == 0, result.output
    assert result.output == (
        "deleted 3 finished deliveries, 2 side-effect records, 1 retrieval logs "
        "older than 30 days\n"
    )
    _assert_purged(engine, before)


def test_cli_json_and_default_from_the_setting(
    engine: Engine, cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    _seed(engine)
    clock.set_clock(lambda: NOW)
    monkeypatch.setenv("PLAYBOOK_RETENTION_DAYS", "5")  # the recent rows are 10 days old
    result = cli("purge", "--dry-run", "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert report["dry_run"] is True
    assert (report["deliveries"], report["side_effects"], report["retrievals"]) == (5, 4, 2)
    assert report["older_than_seconds"] == 5 * 86400
    assert report["cutoff"] == (NOW - timedelta(days=5)).isoformat()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--older-than", "1d"], "keep at least 3 days"),
        (["--older-than", "71h"], "keep at least 3 days"),
        (["--older-than", "thirty"], "--older-than: 'thirty' is not a span"),
        (["--older-than", "0d"], "is not a span"),
    ],
)
def test_cli_refuses_bad_spans_with_one_line(
    engine: Engine, cli, args: list[str], message: str
) -> None:
    _seed(engine)
    before = _counts(engine)
    result = cli("purge", *args)
    assert result.exit_code == 2
    assert message in result.output
    assert "Traceback" not in result.output and len(result.output.strip().splitlines()) == 1
    assert _counts(engine) == before


def test_a_retention_setting_under_three_days_is_refused(
    engine: Engine, cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PLAYBOOK_RETENTION_DAYS", "1")
    result = cli("purge")
    assert result.exit_code == 2
    assert "invalid setting" in result.output and "Traceback" not in result.output


def test_scheduled_job_purges(
    engine: Engine, database_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    _seed(engine)
    before = _counts(engine)
    settings = Settings(
        _env_file=None, PLAYBOOK_DATABASE_URL=database_url, PLAYBOOK_RETENTION_DAYS=30
    )
    clock.set_clock(lambda: NOW)
    with caplog.at_level(logging.INFO, logger="bot.scheduler"):
        purge_job(engine, settings)
    _assert_purged(engine, before)
    assert (
        "purge: deleted 3 finished deliveries, 2 side-effect records, 1 retrieval logs "
        "older than 30 days"
    ) in caplog.text


def test_purge_is_a_scheduled_job(engine: Engine, database_url: str) -> None:
    assert JOBS["purge"] == ("purge_schedule", purge_job)
    defaults = Settings(_env_file=None)
    assert defaults.purge_schedule == "30 4 * * *" and defaults.retention_days == 30
    settings = Settings(
        _env_file=None, PLAYBOOK_DATABASE_URL=database_url, PLAYBOOK_PURGE_SCHEDULE="45 2 * * *"
    )
    scheduler = start(engine, settings, holder="test")
    assert scheduler is not None
    try:
        trigger = str(scheduler.get_job("purge").trigger)
        assert trigger == "cron[month='*', day='*', day_of_week='*', hour='2', minute='45']"
    finally:
        scheduler.shutdown(wait=False)


def test_bad_purge_schedule_is_named() -> None:
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="not a crontab expression"):
        Settings(_env_file=None, PLAYBOOK_PURGE_SCHEDULE="nightly")

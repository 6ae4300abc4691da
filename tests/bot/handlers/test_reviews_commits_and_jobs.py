"""Handlers and jobs that had no test of their own: reviews, commit cites, ignored events,
the scheduled job bodies and the prune command."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import Engine, select, update

from bot.config import Settings
from bot.handlers import IGNORED
from bot.scheduler import JOBS, prune_job, purge_job, retry_job
from playbook import clock
from playbook.db import transaction
from playbook.lessons import lifecycle
from playbook.models import Bullet, Delivery, SideEffect, UsageEvent
from playbook.outcomes import usage
from tests.loop_harness import REPO, Loop, fixture
from tests.support import put


def _lesson(engine: Engine, text: str = "Dedupe payment webhooks") -> str:
    with transaction(engine) as session:
        return lifecycle.add(session, text, learned_from="CTMS-1", actor="seed").bullet.id


def _opened(loop: Loop, body: str = "Fixes CTMS-4337.") -> dict[str, Any]:
    opened = fixture("pull_request.opened")
    opened["pull_request"]["body"] = body
    loop.github_event("pull_request.opened", opened)
    return opened


def _delivery(engine: Engine, event: str) -> Delivery:
    with transaction(engine) as session:
        row = session.scalars(
            select(Delivery).where(Delivery.event == event).order_by(Delivery.id.desc())
        ).first()
        assert row is not None
        session.expunge(row)
        return row


def _cites(engine: Engine) -> list[tuple[str, str | None, str | None, str | None]]:
    with transaction(engine) as session:
        return [
            (e.bullet_id, e.ticket_key, e.pr_key, e.phase)
            for e in session.scalars(select(UsageEvent).where(UsageEvent.kind == "cited"))
        ]


def _review(opened: dict[str, Any], body: str, *, comment: bool = False) -> dict[str, Any]:
    number = opened["pull_request"]["number"]
    key = "comment" if comment else "review"
    return {
        "action": "created" if comment else "submitted",
        key: {"id": 80, "body": body, "user": {"login": "reviewer"}},
        "pull_request": {"number": number},
        "repository": opened["repository"],
        "sender": {"login": "reviewer", "type": "User"},
    }


def test_a_review_citing_a_lesson_is_a_cite_on_the_pr_and_its_ticket(loop: Loop) -> None:
    lesson = _lesson(loop.engine)
    opened = _opened(loop)
    loop.github_event("pull_request_review.submitted", _review(opened, f"Good use of [{lesson}]."))
    loop.process()
    pr = f"{REPO}#{opened['pull_request']['number']}"
    assert [(c[0], c[1], c[2]) for c in _cites(loop.engine)] == [(lesson, "CTMS-4337", pr)]
    assert _delivery(loop.engine, "pull_request_review").status == "done"


def test_a_review_comment_cites_too_and_a_review_without_ids_is_ignored(loop: Loop) -> None:
    lesson = _lesson(loop.engine)
    opened = _opened(loop)
    loop.github_event("pull_request_review.submitted", _review(opened, "Looks good to me"))
    loop.process()
    review = _delivery(loop.engine, "pull_request_review")
    assert (review.status, review.reason) == ("ignored", "no known lesson id in the review")
    loop.github_event(
        "pull_request_review_comment.created", _review(opened, f"see {lesson}", comment=True)
    )
    loop.process()
    assert [c[0] for c in _cites(loop.engine)] == [lesson]
    # An id that names no lesson is no cite.
    loop.github_event("pull_request_review.submitted", _review(opened, "like pb-999"))
    loop.process()
    assert len(_cites(loop.engine)) == 1


def test_lesson_ids_in_commit_messages_are_cites_when_commits_are_pushed(loop: Loop) -> None:
    lesson = _lesson(loop.engine)
    other = _lesson(loop.engine, "Never hold a database lock across an HTTP call")
    opened = _opened(loop, "Fixes CTMS-4337, no lessons named here.")
    number = opened["pull_request"]["number"]
    loop.github.pull_commits[(REPO, number)] = [
        f"Retry with an idempotency key ({lesson})",
        "Fix typo",
        f"Release the lock first, per {other.upper()}",
    ]
    pushed = fixture("pull_request.opened")
    pushed["action"] = "synchronize"
    pushed["pull_request"]["body"] = "Fixes CTMS-4337, no lessons named here."
    loop.github_event("pull_request.synchronize", pushed)
    loop.process()
    cites = _cites(loop.engine)
    assert sorted(c[0] for c in cites) == sorted([lesson, other])
    assert {c[2] for c in cites} == {f"{REPO}#{number}"}
    assert {c[3] for c in cites} == {"commit"}
    with transaction(loop.engine) as session:
        reads = session.scalars(select(SideEffect).where(SideEffect.action == "read_commits"))
        assert [effect.status for effect in reads] == ["done"]
    # Pushed again with the same commits: the cites are not counted twice.
    loop.github_event("pull_request.synchronize", pushed)
    loop.process()
    with transaction(loop.engine) as session:
        assert lifecycle.get(session, lesson).cites == 1


@pytest.mark.parametrize(("source", "event"), sorted(IGNORED))
def test_every_event_on_the_ignore_list_is_acknowledged_and_ignored(
    loop: Loop, source: str, event: str
) -> None:
    assert source == "github"
    payload = {"action": "completed", "repository": fixture("issues.opened")["repository"]}
    answer = loop.github_event(f"{event}.completed", payload)
    assert answer.status_code == 202
    loop.process()
    row = _delivery(loop.engine, event)
    assert row.status == "ignored"
    assert row.reason is not None and "ignore list" in row.reason


def test_an_event_nobody_handles_is_ignored_with_the_reason(loop: Loop) -> None:
    loop.github_event("deployment.created", {"action": "created"})
    loop.process()
    row = _delivery(loop.engine, "deployment")
    assert (row.status, row.reason) == ("ignored", "no handler for github deployment.created")


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
    assert set(JOBS) == {"prune", "reconcile", "retry", "purge"}
    for setting, body in JOBS.values():
        assert setting in Settings.model_fields and callable(body)


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

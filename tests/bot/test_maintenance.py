"""Reconcile, backfill, doctor and demo: real PyGithub and jira clients against the fake servers."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import Engine, func, select

from bot.github import GitHubClients
from bot.reconcile import reconcile
from playbook import clock, upkeep
from playbook.db import transaction
from playbook.lessons import lifecycle
from playbook.models import UsageEvent
from playbook.outcomes import usage
from tests.loop_harness import INSTALLATION, REPO, Loop


def _iso(value: datetime) -> str:
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def hook_delivery(loop: Loop, guid: str, status_code: int, age: timedelta) -> int:
    """One attempt in the App's delivery log, as GET /app/hook/deliveries lists it."""
    delivery_id = len(loop.github.hook_deliveries) + 1
    loop.github.hook_deliveries.append(
        {
            "id": delivery_id,
            "guid": guid,
            "delivered_at": _iso(datetime.now(UTC) - age),
            "redelivery": False,
            "duration": 0.3,
            "status": "OK" if status_code < 300 else "Bad Gateway",
            "status_code": status_code,
            "event": "issues",
            "action": "opened",
            "installation_id": INSTALLATION,
            "repository_id": 1,
            "throttled_at": None,
        }
    )
    return delivery_id


def test_reconcile_redelivers_only_failed_deliveries_the_inbox_lacks(loop: Loop) -> None:
    missing, stored, recovered, too_old = (str(uuid.uuid4()) for _ in range(4))
    hook_delivery(loop, too_old, 502, timedelta(hours=80))
    wanted = hook_delivery(loop, missing, 502, timedelta(hours=2))
    hook_delivery(loop, stored, 504, timedelta(hours=1))
    hook_delivery(loop, recovered, 502, timedelta(hours=3))
    hook_delivery(loop, recovered, 202, timedelta(hours=2))  # a later attempt got through
    hook_delivery(loop, str(uuid.uuid4()), 202, timedelta(minutes=5))
    # The failed answer for `stored` was lost on the way back; the delivery itself arrived.
    payload = {"action": "opened", "issue": {"number": 1, "title": "t"}, "repository": {}}
    assert loop.github_event("issues.opened", payload, delivery=stored).status_code == 202

    dry = reconcile(loop.engine, GitHubClients(loop.settings), timedelta(hours=72), dry_run=True)
    assert dry.redelivered == [missing] and loop.github.redelivered == []

    report = reconcile(loop.engine, GitHubClients(loop.settings), timedelta(hours=72))
    assert report.redelivered == [missing]
    assert (report.failed, report.already_in_inbox) == (2, 1)
    assert loop.github.redelivered == [wanted]


def test_reconcile_cli_says_what_it_did_and_needs_the_app(
    loop: Loop, cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    failed = str(uuid.uuid4())
    hook_delivery(loop, failed, 500, timedelta(hours=1))
    for name in ("GITHUB_APP_ID", "GITHUB_APP_PRIVATE_KEY", "GITHUB_API_URL"):
        monkeypatch.setenv(name, str(loop.settings.model_dump()[name.lower()]))
    monkeypatch.setenv("PLAYBOOK_GITHUB_SECONDS_BETWEEN_REQUESTS", "0")
    result = cli("reconcile", "--since", "12h")
    assert result.exit_code == 0, result.output
    assert "1 failed, 0 of those already in the inbox, redelivered 1" in result.output
    assert failed in result.output
    assert cli("reconcile", "--since", "soon").exit_code == 2
    monkeypatch.delenv("GITHUB_APP_ID")
    result = cli("reconcile")
    assert result.exit_code == 2
    assert "GITHUB_APP_ID" in result.output


def test_backfill_applies_closed_pull_requests_within_the_window(loop: Loop) -> None:
    from bot.backfill import backfill
    from bot.worker import Services

    with transaction(loop.engine) as session:
        for text, ticket in (
            ("Dedupe payment webhooks on the event id", "CTMS-70"),
            ("Lesson from the attempt that was rejected", "CTMS-78"),
            ("Lesson from a PR closed long ago", "CTMS-79"),
        ):
            lifecycle.add(session, text, learned_from=ticket, scope="CTMS", actor="seed")
    now = datetime.now(UTC)
    # The author of #5 can write to the repository: its Lessons section is vouched for.
    loop.github.permissions[(REPO, "agent-bot")] = "write"
    loop.github.add_pull(
        REPO,
        5,
        title="CTMS-77 dedupe webhooks",
        body="Fixes CTMS-77, applied [pb-1].\n\n## Lessons\n- Stripe resends events for days.\n",
        state="closed",
        merged=True,
        merged_at=_iso(now - timedelta(days=3)),
        closed_at=_iso(now - timedelta(days=3)),
        updated_at=_iso(now - timedelta(days=3)),
    )
    loop.github.add_pull(
        REPO,
        6,
        title="CTMS-78 rejected attempt",
        body="Cites [pb-1]",
        state="closed",
        closed_by="Codertocat",
        closed_at=_iso(now - timedelta(days=10)),
        updated_at=_iso(now - timedelta(days=10)),
    )
    loop.github.add_pull(
        REPO,
        4,
        title="CTMS-79 ancient",
        state="closed",
        closed_by="Codertocat",
        closed_at=_iso(now - timedelta(days=200)),
        updated_at=_iso(now - timedelta(days=200)),
    )
    services = Services(engine=loop.engine, settings=loop.settings)
    report = backfill(services, REPO, timedelta(days=90))
    assert (report.seen, report.merged, report.closed_unmerged) == (2, 1, 1)
    with transaction(loop.engine) as session:
        cited = lifecycle.get(session, "pb-1")
        assert (cited.cites, cited.cites_success, cited.cites_failure) == (2, 1, 1)
        assert lifecycle.get(session, "pb-2").demoted_reason == "pr_closed_unmerged"
        assert lifecycle.get(session, "pb-3").status == "active"  # outside the window
        captured = lifecycle.get(session, "pb-4")
        assert (captured.status, captured.learned_from) == ("active", "CTMS-77")
    again = backfill(services, REPO, timedelta(days=90))
    assert again.seen == 2
    with transaction(loop.engine) as session:
        assert lifecycle.get(session, "pb-1").cites == 2  # applying twice counts nothing twice


def test_backfill_records_cites_when_they_were_made_so_old_work_looks_old(loop: Loop) -> None:
    from bot.backfill import backfill
    from bot.worker import Services

    now = datetime.now(UTC).replace(microsecond=0)

    def ago(days: float) -> datetime:
        return now - timedelta(days=days)

    with clock.frozen(ago(400)), transaction(loop.engine) as session:
        for text in (
            "Dedupe payment webhooks on the event id",
            "Take the row lock before re-reading the order",
            "Pin the Stripe API version in every client",
            "Never retry a refund without its idempotency key",
        ):
            lifecycle.add(session, text, learned_from="CTMS-1", scope="CTMS", actor="seed")
    loop.github.add_pull(
        REPO,
        7,
        title="CTMS-80 dedupe webhooks",
        body="Fixes CTMS-80, following [pb-1].",
        state="closed",
        merged=True,
        created_at=_iso(ago(85)),
        merged_at=_iso(ago(80)),
        closed_at=_iso(ago(80)),
        updated_at=_iso(ago(80)),
    )
    comments = [
        ("pb-2 helped with the lock ordering", "reviewer", ago(84)),
        ("Captured pb-3, learned from CTMS-80.", "playbook-bot[bot]", ago(83)),  # ours
        ("pb-3 would have helped here", "reviewer", ago(79)),  # after the merge
    ]
    for body, user, at in comments:
        comment = loop.github.add_comment(REPO, 7, body, user)
        comment["created_at"] = comment["updated_at"] = _iso(at)
        if user.endswith("[bot]"):
            comment["user"]["type"] = "Bot"
    loop.github.add_pull(
        REPO,
        8,
        title="CTMS-81 a rejected attempt",
        body="Tried [pb-4].",
        state="closed",
        closed_by="Codertocat",
        created_at=_iso(ago(70)),
        closed_at=_iso(ago(60)),
        updated_at=_iso(ago(60)),
    )
    services = Services(engine=loop.engine, settings=loop.settings)
    backfill(services, REPO, timedelta(days=90))
    with transaction(loop.engine) as session:
        cites = {
            e.bullet_id: (e.ts, e.success, e.phase)
            for e in session.scalars(select(UsageEvent).where(UsageEvent.kind == "cited"))
        }
        assert cites == {
            "pb-1": (ago(85), True, "pr"),
            "pb-2": (ago(84), True, "comment"),
            "pb-4": (ago(70), False, "pr"),
        }
        assert lifecycle.get(session, "pb-1").last_cited_at == ago(85)
        # Prune sees 85 days of history, and a rejected cite 70 days old as old: pb-4 and the
        # never-cited pb-3 are idle; pb-1 and pb-2 helped in merged work, so they stay.
        report = upkeep.prune(session)
        assert report.blocked is None
        assert [c.bullet_id for c in report.candidates] == ["pb-3", "pb-4"]
        assert [c.bullet_id for c in report.kept] == ["pb-1", "pb-2"]
    backfill(services, REPO, timedelta(days=90))
    with transaction(loop.engine) as session:
        assert session.scalar(select(func.count()).select_from(UsageEvent)) == 3
        assert usage.recount(session) == []


def test_a_cite_stamped_in_the_future_is_recorded_now(loop: Loop) -> None:
    from bot.backfill import backfill
    from bot.worker import Services

    with transaction(loop.engine) as session:
        lifecycle.add(session, "Dedupe webhooks", learned_from="CTMS-1", actor="seed")
    future = datetime.now(UTC) + timedelta(days=3650)
    loop.github.add_pull(
        REPO,
        9,
        title="CTMS-90",
        body="Used [pb-1]",
        state="closed",
        merged=True,
        created_at=_iso(future),
        merged_at=_iso(future),
        closed_at=_iso(future),
        updated_at=_iso(future),
    )
    before = datetime.now(UTC)
    backfill(Services(engine=loop.engine, settings=loop.settings), REPO, timedelta(days=90))
    with transaction(loop.engine) as session:
        [cite] = usage.events_for(session, "pb-1")
        assert before <= cite.ts <= datetime.now(UTC)


def test_doctor_reports_each_connection(loop: Loop, cli, monkeypatch: pytest.MonkeyPatch) -> None:
    values = loop.settings.model_dump()
    for name in (
        "GITHUB_APP_ID",
        "GITHUB_APP_PRIVATE_KEY",
        "GITHUB_API_URL",
        "GITHUB_WEBHOOK_SECRET",
        "JIRA_URL",
        "JIRA_EMAIL",
        "JIRA_API_TOKEN",
    ):
        monkeypatch.setenv(name, str(values[name.lower()]))
    result = cli("doctor")
    assert result.exit_code == 0, result.output
    assert "[ok  ] database" in result.output
    assert "[ok  ] GitHub API" in result.output and "1 installation(s)" in result.output
    assert "[ok  ] Jira API" in result.output

    monkeypatch.setenv("GITHUB_API_URL", "http://127.0.0.1:9/")  # nothing listens there
    monkeypatch.delenv("JIRA_URL")
    result = cli("doctor")
    assert result.exit_code == 1
    assert "[FAIL] GitHub API" in result.output and "GITHUB_API_URL" in result.output
    assert "[--  ] Jira API" in result.output and "JIRA_URL" in result.output


def test_demo_runs_the_loop_offline(cli, engine: Engine) -> None:
    result = cli("demo")
    assert result.exit_code == 0, result.output
    assert "would comment on CTMS-4337" in result.output
    assert "deprecate (pr_closed_unmerged" in result.output
    assert "restore (" in result.output
    assert "Final stats:" in result.output
    # The demo works on its own temporary playbook, never the configured one.
    with transaction(engine) as session:
        assert lifecycle.as_of(session, datetime.now(UTC)) == []

"""Each scope's budget (the setting, or the smallest a repository using it sets), the size
`stats` and /api/v1/stats show against it, and the scheduled run under the scheduler's lease."""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy import Engine

from bot.config import Settings
from bot.consolidate import budget_for
from bot.scheduler import JOBS, LEADER, LEADER_TTL, run_exclusively, start
from bot.services import Services
from playbook.db import transaction
from playbook.deliveries import leases
from playbook.models import RepoSettingsRow
from tests.bot.consolidation_world import (
    LINT,
    LINT_AGAIN,
    SCOPE,
    SCOPE_CHARS,
    WEB,
    add,
    proposals,
    repo_budget,
    seed,
)
from webhooks import create_app


def _settings(database_url: str, **values: Any) -> Settings:
    return Settings(_env_file=None, PLAYBOOK_DATABASE_URL=database_url, **values)


def test_a_repositorys_budget_lowers_its_scopes_threshold(
    cli: Any, engine: Engine, database_url: str
) -> None:
    seed(engine)
    add(engine, WEB, LINT, LINT_AGAIN)
    settings = _settings(database_url)
    JOBS["consolidate"][1](engine, settings)
    assert proposals(engine) == []  # 21% of the default 8,000
    # Two repositories read the acme/api lessons: the scope must fit the tighter of them.
    repo_budget(engine, SCOPE, 4000)
    repo_budget(engine, "acme/worker", 2000, scope=SCOPE)
    repo_budget(engine, "acme/site", 30_000, scope=SCOPE)
    budgets = budget_for(Services(engine=engine, settings=settings))
    assert (budgets(SCOPE), budgets(WEB), budgets("global")) == (2000, 8000, 8000)
    JOBS["consolidate"][1](engine, settings)
    assert [(p["scope"], p["member_ids"]) for p in proposals(engine)] == [
        (SCOPE, ["pb-1", "pb-2"])
    ]  # acme/web has a pair too, but is far under its budget

    out = cli("stats")
    assert out.exit_code == 0, out.output
    lines = out.output.splitlines()
    header = lines.index("context budget:")
    assert lines[header + 1].split() == ["scope", "lessons", "chars", "/", "budget", "share"]
    share = round(100 * SCOPE_CHARS / 2000)
    assert lines[header + 2].split() == [
        SCOPE,
        "11",
        f"{SCOPE_CHARS:,}",
        "/",
        "2,000",
        f"{share}%",
        "past",
        "75%:",
        "consolidate",
    ]
    web_chars = len(LINT) + len(LINT_AGAIN)
    assert lines[header + 3].split() == [WEB, "2", f"{web_chars}", "/", "8,000", "2%"]
    report = json.loads(cli("stats", "--json").output)
    assert report["scopes"][0] == {
        "scope": SCOPE,
        "lessons": 11,
        "chars": SCOPE_CHARS,
        "budget": 2000,
        "share": round(SCOPE_CHARS / 2000, 4),
        "over": True,
    }


def test_a_bad_or_missing_budget_in_stored_settings_leaves_the_setting(
    engine: Engine, database_url: str
) -> None:
    repo_budget(engine, "acme/other", 3000)
    with_setting = Services(engine=engine, settings=_settings(database_url))
    assert budget_for(with_setting)("acme/other") == 3000
    # A repository of the scope that sets no budget changes nothing.
    add(engine, SCOPE, LINT)
    with transaction(engine) as session:
        session.add(RepoSettingsRow(repo=SCOPE, repo_values={"comment": False}, problems=[]))
        # A stored file that no longer passes the rules: the default applies.
        session.add(
            RepoSettingsRow(repo="acme/broken", repo_values={"context_budget": 10}, problems=[])
        )
    smaller = _settings(database_url, PLAYBOOK_CONTEXT_BUDGET=5000)
    budgets = budget_for(Services(engine=engine, settings=smaller))
    assert (budgets(SCOPE), budgets("acme/broken"), budgets("acme/other")) == (5000, 5000, 3000)


def test_the_api_stats_size_only_the_scopes_the_caller_sees(
    engine: Engine, database_url: str
) -> None:
    seed(engine)
    add(engine, WEB, LINT, LINT_AGAIN)
    settings = _settings(
        database_url,
        PLAYBOOK_API_TOKEN="maintainer-token",
        PLAYBOOK_AGENT_TOKENS="web@acme/web:web-token",
        PLAYBOOK_CONTEXT_BUDGET=2000,
    )
    api = create_app(settings, engine=engine).test_client()
    everything = api.get("/api/v1/stats", headers={"Authorization": "Bearer maintainer-token"})
    assert everything.status_code == 200, everything.text
    assert [(s["scope"], s["budget"], s["over"]) for s in everything.get_json()["scopes"]] == [
        (SCOPE, 2000, True),
        (WEB, 2000, False),
    ]
    scoped = api.get("/api/v1/stats", headers={"Authorization": "Bearer web-token"})
    assert [s["scope"] for s in scoped.get_json()["scopes"]] == [WEB]


def test_the_scheduled_run_waits_for_the_schedulers_lease(
    engine: Engine, database_url: str
) -> None:
    seed(engine)
    settings = _settings(
        database_url, PLAYBOOK_CONTEXT_BUDGET=2000, PLAYBOOK_CONSOLIDATE_SCHEDULE="30 5 * * 1"
    )
    scheduler = start(engine, settings, holder="test")
    assert scheduler is not None
    try:
        job = scheduler.get_job("consolidate")
        assert str(job.trigger) == (
            "cron[month='*', day='*', day_of_week='1', hour='5', minute='30']"
        )
    finally:
        scheduler.shutdown(wait=False)

    def body() -> None:
        JOBS["consolidate"][1](engine, settings)

    assert leases.acquire(engine, LEADER, "other-process", LEADER_TTL)
    assert not run_exclusively(engine, "consolidate", "this-process", body)
    assert proposals(engine) == []  # another process leads the schedule
    leases.release(engine, LEADER, "other-process")
    assert run_exclusively(engine, "consolidate", "this-process", body)
    assert [p["member_ids"] for p in proposals(engine)] == [["pb-1", "pb-2"]]

"""`playbook-bot rate --backfill`: rating jobs for PRs closed before a model was set, once each.

The jobs are inbox rows the model's worker runs; the CLI and the scheduled run only queue them.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import Engine, select, update

from bot.config import Settings
from bot.scheduler import JOBS, start
from bot.worker import Services, Worker
from playbook import clock
from playbook.db import transaction
from playbook.lessons import lifecycle
from playbook.models import Delivery, Rating
from playbook.outcomes import tracking, usage
from playbook.ratings import backfill, store
from tests.fakes.github import FakeGitHub
from tests.fakes.model import FakeModel

REPO = "acme/api"
MODEL = "test-model"
MODEL_KEY = "model-key"
TOKEN = "ghp_backfill_token"
# The model's endpoint as set for commands that only queue (nothing is asked of it).
UNUSED_ENDPOINT = "http://127.0.0.1:9/v1"


# Lessons far enough apart that none is taken for a near-duplicate of another.
TEXTS = (
    "Retry webhooks with an idempotency key",
    "Never hold a database lock across HTTP calls",
    "Pin chromium in CI for screenshot tests",
    "Vendor the chart library for the stats page",
    "Cache the search index between requests",
)


def add_lessons(engine: Engine, count: int) -> list[str]:
    """The first ``count`` of TEXTS as active lessons, pb-1 onwards."""
    with transaction(engine) as session:
        return [
            lifecycle.add(session, text, learned_from="X-1", actor="t").bullet.id
            for text in TEXTS[:count]
        ]


def closed_pull(
    engine: Engine,
    number: int,
    ticket: str,
    *,
    days_ago: float = 1,
    state: str = "merged",
    shown: list[str] | None = None,
    cited: list[str] | None = None,
) -> str:
    """PR ``number`` of acme/api, closed ``days_ago``, linked to ``ticket``, which was shown
    ``shown`` before and whose PR cited ``cited``; returns the PR's key."""
    key = f"{REPO}#{number}"
    closed = clock.now() - timedelta(days=days_ago)
    with transaction(engine) as session:
        if shown:
            usage.record_once(session, "loaded", shown, ticket_key=ticket, ts=closed - timedelta(1))
        seen = tracking.PullRequestState(
            key=key,
            repo=REPO,
            number=number,
            title=f"{ticket}: work",
            head_ref=f"feature-{number}",
            url=None,
            state=state,
            updated_at=closed,
            closed_at=None if state == "open" else closed,
            merged_at=closed if state == "merged" else None,
        )
        tracking.observe(session, seen)
        tracking.link(session, key, [(ticket, "jira")])
        if cited:
            usage.record(session, "cited", cited, ticket_key=ticket, pr_key=key, ts=closed)
    return key


def rating_jobs(engine: Engine) -> dict[str, tuple[str, str, int]]:
    """The model.rate jobs in the inbox: delivery id -> (status, PR in the payload, attempts)."""
    with transaction(engine) as session:
        rows = session.scalars(
            select(Delivery).where(Delivery.source == "playbook", Delivery.event == "model.rate")
        )
        return {r.delivery_id: (r.status, json.loads(r.payload)["pr"], r.attempts) for r in rows}


@pytest.fixture
def model_cli(cli: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    """The CLI with a model endpoint set (the commands here only queue: it is never asked)."""
    monkeypatch.setenv("PLAYBOOK_MODEL_BASE_URL", UNUSED_ENDPOINT)
    monkeypatch.setenv("PLAYBOOK_MODEL", MODEL)
    return cli


@pytest.fixture
def history(engine: Engine) -> dict[str, str]:
    """PRs of the last 90 days and before, each with a reason to be queued or not."""
    pb = add_lessons(engine, 4)
    keys = {
        # Candidates: shown lessons they did not cite (all or some), nothing rated.
        "recent": closed_pull(engine, 5, "CTMS-5", days_ago=2, shown=pb[:2]),
        "partly_cited": closed_pull(
            engine, 4, "CTMS-4", days_ago=10, state="closed", shown=pb[:3], cited=[pb[0]]
        ),
        # Not candidates.
        "all_cited": closed_pull(engine, 3, "CTMS-3", days_ago=3, shown=pb[:2], cited=pb[:2]),
        "rated": closed_pull(engine, 6, "CTMS-6", days_ago=4, shown=pb[:2]),
        "too_old": closed_pull(engine, 2, "CTMS-2", days_ago=120, shown=pb[:2]),
        "open": closed_pull(engine, 7, "CTMS-7", state="open", shown=pb[:2]),
        "nothing_shown": closed_pull(engine, 8, "CTMS-8", days_ago=1),
    }
    with transaction(engine) as session:
        scored = [store.Scored(pb[0], 0.5, "followed")]
        store.record(
            session,
            scored,
            pr_key=keys["rated"],
            ticket_key="CTMS-6",
            model=MODEL,
            prompt_version="rate-1",
        )
    return keys


def test_a_dry_run_lists_the_prs_and_queues_nothing(
    model_cli: Any, engine: Engine, history: dict[str, str]
) -> None:
    result = model_cli("rate", "--backfill", "--dry-run")
    assert result.exit_code == 0, result.output
    # Newest closed first; the one shown three lessons cited one of them.
    assert result.stdout.splitlines() == [
        f"would queue {REPO}#5: 2 lessons shown, not cited",
        f"would queue {REPO}#4: 2 lessons shown, not cited",
        "would queue 2 rating jobs for pull requests closed in the last 90d",
        "once queued, the model worker runs them (`playbook-bot worker` or `serve`), within "
        "PLAYBOOK_MODEL_DAILY_CALLS and PLAYBOOK_MODEL_DAILY_TOKENS",
    ]
    assert rating_jobs(engine) == {}


def test_a_run_queues_one_job_per_pr_and_a_second_run_none(
    model_cli: Any, engine: Engine, history: dict[str, str]
) -> None:
    first = model_cli("rate", "--backfill")
    assert first.exit_code == 0, first.output
    lines = first.stdout.splitlines()
    assert lines[:3] == [
        f"queued {REPO}#5: 2 lessons shown, not cited",
        f"queued {REPO}#4: 2 lessons shown, not cited",
        "queued 2 rating jobs for pull requests closed in the last 90d",
    ]
    assert lines[3] == (
        "this only queues them: the model worker runs them (`playbook-bot worker` or `serve`), "
        "within PLAYBOOK_MODEL_DAILY_CALLS and PLAYBOOK_MODEL_DAILY_TOKENS"
    )
    assert rating_jobs(engine) == {
        f"rate:{REPO}#5": ("pending", f"{REPO}#5", 0),
        f"rate:{REPO}#4": ("pending", f"{REPO}#4", 0),
    }
    again = model_cli("rate", "--backfill")
    assert again.exit_code == 0, again.output
    assert again.stdout.splitlines() == [
        "queued 0 rating jobs for pull requests closed in the last 90d"
    ]
    assert len(rating_jobs(engine)) == 2


def test_since_bounds_the_window(model_cli: Any, engine: Engine, history: dict[str, str]) -> None:
    week = model_cli("rate", "--backfill", "--since", "1w", "--dry-run")
    assert week.exit_code == 0, week.output
    assert week.stdout.splitlines()[0] == f"would queue {REPO}#5: 2 lessons shown, not cited"
    assert "would queue 1 rating job for pull requests closed in the last 1w" in week.output
    # 120 days back takes in the PR closed before the default window.
    longer = model_cli("rate", "--backfill", "--since", "20w", "--dry-run")
    assert f"would queue {REPO}#2: 2 lessons shown" in longer.output
    assert "would queue 3 rating jobs" in longer.output


def test_a_queued_or_finished_job_is_left_alone_and_a_dead_one_queued_again(
    model_cli: Any, engine: Engine, history: dict[str, str]
) -> None:
    assert model_cli("rate", "--backfill").exit_code == 0
    with transaction(engine) as session:
        session.execute(
            update(Delivery)
            .where(Delivery.delivery_id == f"rate:{REPO}#5")
            .values(status="dead", attempts=5, last_error="model endpoint: refused the key")
        )
        session.execute(
            update(Delivery).where(Delivery.delivery_id == f"rate:{REPO}#4").values(status="done")
        )
    result = model_cli("rate", "--backfill")
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[:2] == [
        f"queued {REPO}#5: 2 lessons shown, not cited (its last job died)",
        "queued 1 rating job for pull requests closed in the last 90d",
    ]
    assert rating_jobs(engine) == {
        f"rate:{REPO}#5": ("pending", f"{REPO}#5", 0),
        f"rate:{REPO}#4": ("done", f"{REPO}#4", 0),
    }


def test_a_run_stops_at_its_bound_newest_first(
    model_cli: Any, engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    pb = add_lessons(engine, 1)
    for number in range(1, 6):
        closed_pull(engine, number, f"CTMS-{number}", days_ago=10 - number, shown=pb)
    monkeypatch.setattr(backfill, "MAX_PULLS", 2)
    dry = model_cli("rate", "--backfill", "--dry-run")
    assert dry.stdout.splitlines() == [
        f"would queue {REPO}#5: 1 lesson shown, not cited",
        f"would queue {REPO}#4: 1 lesson shown, not cited",
        "would queue 2 rating jobs for pull requests closed in the last 90d",
        "stopped at 2 pull requests per run, the most recently closed first: "
        "a run queues these, the next run the older ones",
        "once queued, the model worker runs them (`playbook-bot worker` or `serve`), within "
        "PLAYBOOK_MODEL_DAILY_CALLS and PLAYBOOK_MODEL_DAILY_TOKENS",
    ]
    first = model_cli("rate", "--backfill")
    assert first.exit_code == 0, first.output
    assert first.stdout.splitlines()[:4] == [
        f"queued {REPO}#5: 1 lesson shown, not cited",
        f"queued {REPO}#4: 1 lesson shown, not cited",
        "queued 2 rating jobs for pull requests closed in the last 90d",
        "stopped at 2 pull requests per run, the most recently closed first: "
        "run it again for the older ones",
    ]
    second = model_cli("rate", "--backfill")
    assert [line.split(":")[0] for line in second.stdout.splitlines()[:2]] == [
        f"queued {REPO}#3",
        f"queued {REPO}#2",
    ]
    third = model_cli("rate", "--backfill")
    assert third.stdout.splitlines()[:2] == [
        f"queued {REPO}#1: 1 lesson shown, not cited",
        "queued 1 rating job for pull requests closed in the last 90d",
    ]
    assert "stopped at" not in third.output
    assert len(rating_jobs(engine)) == 5


def test_prs_with_nothing_to_rate_do_not_use_up_the_bound(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Read one PR at a time: the PRs in between, each citing all it was shown, are skipped
    # without ending the search.
    monkeypatch.setattr(backfill, "PAGE", 1)
    pb = add_lessons(engine, 1)
    for number in range(1, 5):
        cited = pb if number in (2, 3) else None
        closed_pull(engine, number, f"CTMS-{number}", days_ago=10 - number, shown=pb, cited=cited)
    with transaction(engine) as session:
        found = backfill.candidates(session, clock.now() - timedelta(days=90), limit=2)
    assert [(c.key, c.lessons, c.dead) for c in found] == [
        (f"{REPO}#4", pb, False),
        (f"{REPO}#1", pb, False),
    ]


def test_without_a_model_it_says_which_settings_to_set(
    cli: Any, engine: Engine, history: dict[str, str]
) -> None:
    result = cli("rate", "--backfill", "--dry-run")
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [
        "error: no model endpoint is set: set PLAYBOOK_MODEL_BASE_URL and PLAYBOOK_MODEL "
        "to rate lessons"
    ]
    assert rating_jobs(engine) == {}


def test_rate_without_backfill_or_with_a_bad_span_is_a_usage_error(model_cli: Any) -> None:
    bare = model_cli("rate")
    assert bare.exit_code == 2
    [line] = bare.stderr.splitlines()
    assert line.startswith("error: say --backfill: rating jobs are otherwise queued as PRs close")
    assert line.endswith(" rate --help`)")
    bad = model_cli("rate", "--backfill", "--since", "soon")
    assert bad.exit_code == 2
    assert bad.stderr.splitlines() == [
        "error: --since: 'soon' is not a span such as 90d, 12h or 2w"
    ]


@pytest.fixture
def servers() -> Iterator[tuple[FakeGitHub, FakeModel]]:
    """Fake GitHub (with a token) and a fake model that rates every lesson it is asked about."""
    github = FakeGitHub()
    github.start()
    github.personal_tokens.add(TOKEN)
    github.add_repo(REPO)
    model = FakeModel(models=(MODEL,), api_key=MODEL_KEY)
    model.start()

    def rate_all(body: dict[str, Any]) -> dict[str, Any]:
        asked = re.findall(r"^- (pb-\d+): ", body["messages"][-1]["content"], re.MULTILINE)
        return {"ratings": [{"id": i, "score": 0.5, "reason": "followed"} for i in asked]}

    model.answer_with(rate_all)
    yield github, model
    model.stop()
    github.stop()


def _model_settings(database_url: str, github: FakeGitHub, model: FakeModel) -> dict[str, Any]:
    return {
        "PLAYBOOK_DATABASE_URL": database_url,
        "GITHUB_TOKEN": TOKEN,
        "GITHUB_API_URL": github.url,
        "PLAYBOOK_GITHUB_SECONDS_BETWEEN_REQUESTS": 0,
        "PLAYBOOK_MODEL_BASE_URL": model.base_url,
        "PLAYBOOK_MODEL": MODEL,
        "PLAYBOOK_MODEL_API_KEY": MODEL_KEY,
    }


def test_after_the_model_worker_runs_the_jobs_a_backfill_finds_nothing(
    cli: Any,
    engine: Engine,
    database_url: str,
    history: dict[str, str],
    servers: tuple[FakeGitHub, FakeModel],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    github, model = servers
    for number in (4, 5):
        github.add_pull(REPO, number, title=f"CTMS-{number}: work", state="closed")
    values = _model_settings(database_url, github, model)
    for name, value in values.items():
        monkeypatch.setenv(name, str(value))
    assert "queued 2 rating jobs" in cli("rate", "--backfill").output

    worker = Worker(
        Services(engine=engine, settings=Settings(_env_file=None, **values)), queue="model"
    )
    while worker.run_once():
        pass

    assert {status for status, _, _ in rating_jobs(engine).values()} == {"done"}
    assert len(model.chat_requests()) == 2
    with transaction(engine) as session:
        rated = sorted(session.execute(select(Rating.pr_key, Rating.bullet_id)).all())
    assert rated == [
        (f"{REPO}#4", "pb-2"),
        (f"{REPO}#4", "pb-3"),
        (f"{REPO}#5", "pb-1"),
        (f"{REPO}#5", "pb-2"),
        (f"{REPO}#6", "pb-1"),  # rated before the backfill
    ]
    third = cli("rate", "--backfill", "--dry-run")
    assert third.exit_code == 0, third.output
    assert third.stdout.splitlines() == [
        "would queue 0 rating jobs for pull requests closed in the last 90d"
    ]


def test_the_scheduled_backfill_runs_only_with_a_model_and_soon_after_start(
    engine: Engine, database_url: str, history: dict[str, str]
) -> None:
    plain = Settings(_env_file=None, PLAYBOOK_DATABASE_URL=database_url)
    with_model = Settings(
        _env_file=None,
        PLAYBOOK_DATABASE_URL=database_url,
        PLAYBOOK_MODEL_BASE_URL=UNUSED_ENDPOINT,
        PLAYBOOK_MODEL=MODEL,
        PLAYBOOK_RATE_BACKFILL_SCHEDULE="10 2 * * *",
    )
    scheduler = start(engine, plain, holder="test")
    assert scheduler is not None
    try:
        assert "rate_backfill" not in {job.id for job in scheduler.get_jobs()}
    finally:
        scheduler.shutdown(wait=False)
    scheduler = start(engine, with_model, holder="test")
    assert scheduler is not None
    try:
        job = scheduler.get_job("rate_backfill")
        assert str(job.trigger) == (
            "cron[month='*', day='*', day_of_week='*', hour='2', minute='10']"
        )
        # The first run comes minutes after the start, not at the next 02:10.
        assert job.next_run_time - datetime.now(UTC) < timedelta(minutes=6)
    finally:
        scheduler.shutdown(wait=False)

    body = JOBS["rate_backfill"][1]
    body(engine, plain)
    assert rating_jobs(engine) == {}
    body(engine, with_model)
    assert set(rating_jobs(engine)) == {f"rate:{REPO}#5", f"rate:{REPO}#4"}
    body(engine, with_model)
    assert len(rating_jobs(engine)) == 2


def test_a_bad_schedule_setting_is_named() -> None:
    with pytest.raises(ValueError, match="not a crontab expression"):
        Settings(_env_file=None, PLAYBOOK_RATE_BACKFILL_SCHEDULE="daily")

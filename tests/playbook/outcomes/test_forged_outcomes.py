"""Forged outcomes: how far one agent token's reports can move a lesson, and the write limit."""

from __future__ import annotations

from datetime import timedelta
from fractions import Fraction
from typing import Any

import anyio
import pytest
from mcp import Client
from sqlalchemy import Engine, select, update

from bot.config import Settings
from bot.mcp_server import build_server
from playbook import agents, clock, rate_limits, upkeep
from playbook.db import transaction
from playbook.lessons import lifecycle
from playbook.models import Bullet, RateWindow
from playbook.outcomes import self_reports, tracking, usage
from playbook.search import ranking
from tests.payloads import fixture
from tests.support import ROOT, saw
from webhooks import create_app

MAINTAINER = {"Authorization": "Bearer maintainer-token"}
MALLORY = {"Authorization": "Bearer mallory-token"}
EVE = {"Authorization": "Bearer eve-token"}
TEXTS = (
    "Retry Stripe webhooks with the event id as the idempotency key",
    "Retry Stripe payouts with a fresh idempotency key per attempt",
    "Pin chromium in CI so screenshots stay stable",
)
# Reports in one flood. Each bound is a count (no rating, one rating, a shift of at most 1/6),
# so a bit over what would break it is enough: four more successes after one merged PR already
# move confidence past 1/6, and past the 5 PR ratings the last test gives a lesson. The API's
# own limit of 1,000 events a request is checked in tests/webhooks/test_malformed_requests.py.
FLOOD = 20


def settings_for(database_url: str, writes_per_minute: int = 1000) -> Settings:
    return Settings(
        PLAYBOOK_DATABASE_URL=database_url,
        PLAYBOOK_API_TOKEN="maintainer-token",
        PLAYBOOK_AGENT_TOKENS="mallory:mallory-token,eve:eve-token",
        PLAYBOOK_AGENT_WRITES_PER_MINUTE=writes_per_minute,
        _env_file=None,
    )


@pytest.fixture
def lessons(engine: Engine) -> Engine:
    """Three active lessons made 40 days ago, and a usage log as old (prune may run)."""
    long_ago = clock.now() - timedelta(days=40)
    with transaction(engine) as session:
        for text in TEXTS:
            lifecycle.add(session, text, learned_from="CTMS-1", actor="t")
        session.execute(update(Bullet).values(created_at=long_ago, updated_at=long_ago))
        usage.record(session, "loaded", ["pb-3"], ticket_key="CTMS-1", ts=long_ago)
    return engine


@pytest.fixture
def api(engine: Engine, database_url: str) -> Any:
    return create_app(settings_for(database_url), engine=engine).test_client()


def flood(api: Any, headers: dict[str, str], tickets: list[str], success: bool) -> dict[str, Any]:
    """One request of a cite of pb-1 on each ticket, all with the same outcome."""
    events = [
        {"event": "cited", "lessonIds": ["pb-1"], "ticketId": t, "phaseSuccess": success}
        for t in tickets
    ]
    response = api.post("/api/v1/usage", json=events, headers=headers)
    assert response.status_code == 201, response.get_json()
    return response.get_json()


def confidence(engine: Engine, bullet_id: str = "pb-1") -> Fraction:
    with transaction(engine) as session:
        bullet = lifecycle.get(session, bullet_id)
        wins, losses = bullet.cites_success, bullet.cites_failure
    return Fraction(wins + 1, wins + losses + 2)


def merged_pr_cites(engine: Engine, bullet_id: str, merged: int, closed: int = 0) -> None:
    """Cites of a lesson in PRs GitHub reported merged or closed unmerged (observed evidence)."""
    with transaction(engine) as session:
        for n in range(merged + closed):
            usage.record(
                session,
                "cited",
                [bullet_id],
                ticket_key=f"CTMS-{900 + n}",
                pr_key=f"acme/api#{n + 1}",
                success=n < merged,
                dedup_keys=[usage.once_key("cited", f"acme/api#{n + 1}", bullet_id)],
            )


def ranked_ids(api: Any) -> list[str]:
    answer = api.get("/api/v1/search?q=Retry+Stripe+idempotency+key&k=3", headers=MAINTAINER)
    return [lesson["id"] for lesson in answer.get_json()["lessons"]]


def report(engine: Engine) -> tuple[list[str], list[str], list[str], list[str]]:
    """(most helpful, most harmful, prune candidates now, prune candidates a month later)."""
    now = clock.now()
    with transaction(engine) as session:
        stats = upkeep.stats(session)
        today = upkeep.prune(session, now=now)
        later = upkeep.prune(session, now=now + timedelta(days=31))
    return (
        [line["id"] for line in stats["most_helpful"]],
        [line["id"] for line in stats["most_harmful"]],
        [c.bullet_id for c in today.candidates],
        [c.bullet_id for c in later.candidates],
    )


@pytest.mark.parametrize("success", [False, True], ids=["failure", "success"])
def test_a_flood_of_outcomes_on_invented_tickets_moves_nothing(
    api: Any, lessons: Engine, success: bool
) -> None:
    before = ranked_ids(api)
    answer = flood(api, MALLORY, [f"FAKE-{n}" for n in range(FLOOD)], success)
    assert answer == {
        "status": "recorded",
        "events": FLOOD,
        "counted": 0,
        "rated": 0,
        "discounted": {"unknown_ticket": FLOOD},
    }
    assert confidence(lessons) == Fraction(1, 2)
    helpful, harmful, prunable_now, prunable_later = report(lessons)
    assert "pb-1" not in helpful and "pb-1" not in harmful
    # Reports about tickets the bot never saw are not use either: pb-1 is idle.
    assert "pb-1" in prunable_now and "pb-1" in prunable_later
    assert ranked_ids(api) == before
    # Recorded for reporting all the same: the lesson's history shows the claims.
    lesson = api.get("/api/v1/lessons/pb-1", headers=MAINTAINER).get_json()
    assert lesson["cites"] == 0
    assert any(e["ticket"] == f"FAKE-{FLOOD - 1}" for e in lesson["events"])
    # The stats do not take them for use: no cites, no cite rate, but said apart.
    stats = api.get("/api/v1/stats", headers=MAINTAINER).get_json()
    assert (stats["usage"]["cites"], stats["usage"]["not_counted"]) == (0, FLOOD)
    assert stats["cite_rate_counts"]["cited"] == 0


@pytest.mark.parametrize("success", [False, True], ids=["failure", "success"])
def test_a_flood_of_outcomes_on_seen_tickets_rates_nothing_without_pr_evidence(
    api: Any, lessons: Engine, success: bool
) -> None:
    tickets = [f"CTMS-{n}" for n in range(2000, 2000 + FLOOD)]
    saw(lessons, *tickets)
    before = ranked_ids(api)
    answer = flood(api, MALLORY, tickets, success)
    assert (answer["counted"], answer["rated"]) == (FLOOD, 0)
    assert answer["discounted"] == {"needs_pr_evidence": FLOOD}
    assert confidence(lessons) == Fraction(1, 2)
    helpful, harmful, prunable_now, prunable_later = report(lessons)
    assert "pb-1" not in helpful and "pb-1" not in harmful
    # Cited on real tickets, so in use today; not kept for good once that use stops.
    assert "pb-1" not in prunable_now and "pb-1" in prunable_later
    assert ranked_ids(api) == before


@pytest.mark.parametrize("success", [False, True], ids=["failure", "success"])
def test_one_token_adds_at_most_one_rating_to_a_lesson_github_rated(
    api: Any, lessons: Engine, success: bool
) -> None:
    merged_pr_cites(lessons, "pb-1", merged=1)
    tickets = [f"CTMS-{n}" for n in range(2000, 2000 + FLOOD)]
    saw(lessons, *tickets)
    start = confidence(lessons)
    answer = flood(api, MALLORY, tickets, success)
    assert (answer["counted"], answer["rated"]) == (FLOOD, 1)
    assert answer["discounted"] == {"one_per_source": FLOOD - 1}
    assert abs(confidence(lessons) - start) <= self_reports.MAX_CONFIDENCE_SHIFT
    # Sending them again, or flipped, changes nothing more.
    flood(api, MALLORY, tickets, not success)
    assert abs(confidence(lessons) - start) <= self_reports.MAX_CONFIDENCE_SHIFT
    _, harmful, _, _ = report(lessons)
    assert "pb-1" not in harmful  # one merged PR against one self-reported failure: a tie
    # A second token may not outnumber GitHub's evidence with its own report.
    more = [f"CTMS-{n}" for n in range(3000, 3010)]
    saw(lessons, *more)
    other = flood(api, EVE, more, success)
    assert (other["counted"], other["rated"]) == (10, 0)
    assert other["discounted"] == {"needs_pr_evidence": 10}


def test_the_bound_holds_whatever_github_said_before(engine: Engine) -> None:
    # More reports than the most PR ratings below (5): a cap that grew with GitHub's would show.
    tickets = [f"T-{n}" for n in range(8)]
    saw(engine, *tickets)
    for observed in range(6):
        for merged in range(observed + 1):
            with transaction(engine) as session:
                bullet_id = lifecycle.add(
                    session, f"lesson {observed} {merged} zz", learned_from="X-1", actor="t"
                ).bullet.id
            merged_pr_cites(engine, bullet_id, merged, observed - merged)
            start = confidence(engine, bullet_id)
            with transaction(engine) as session:
                for n, ticket in enumerate(tickets):
                    usage.record_once(
                        session, "cited", [bullet_id], ticket_key=ticket, success=n % 2 == 0,
                        source="agent:mallory",
                    )  # fmt: skip
            with transaction(engine) as session:
                bullet = lifecycle.get(session, bullet_id)
                ratings = bullet.cites_success + bullet.cites_failure
            assert ratings - observed == (1 if observed else 0)
            assert abs(confidence(engine, bullet_id) - start) <= self_reports.MAX_CONFIDENCE_SHIFT


def test_a_report_never_changes_what_a_pull_request_showed(api: Any, lessons: Engine) -> None:
    merged_pr_cites(lessons, "pb-1", merged=1)
    saw(lessons, "acme/api#1")
    # The PR's own key as the ticket: the same (ticket, lesson) as the PR's observed cite.
    flood(api, MALLORY, ["acme/api#1"], False)
    with transaction(lessons) as session:
        bullet = lifecycle.get(session, "pb-1")
        assert (bullet.cites, bullet.cites_success, bullet.cites_failure) == (1, 1, 0)


def test_a_report_from_the_future_is_recorded_as_now(api: Any, lessons: Engine) -> None:
    saw(lessons, "CTMS-5")
    event = {"event": "cited", "lessonIds": ["pb-1"], "ticketId": "CTMS-5", "ts": "2999-01-01"}
    assert api.post("/api/v1/usage", json=event, headers=MALLORY).status_code == 201
    with transaction(lessons) as session:
        assert lifecycle.get(session, "pb-1").last_cited_at <= clock.now()


def test_deliveries_make_tickets_seen(engine: Engine, loop: Any) -> None:

    with transaction(engine) as session:
        lifecycle.add(session, TEXTS[0], learned_from="CTMS-1", actor="t")
        tracking.observe(
            session,
            tracking.PullRequestState(
                "acme/api#7", "acme/api", 7, "t", "b", None, "open", clock.now()
            ),
        )
        tracking.link(session, "acme/api#7", [("CTMS-7", "jira")])
    assert loop.jira_event(fixture("jira.issue_created")).status_code in (200, 202)
    loop.process()
    with transaction(engine) as session:
        for ticket in ("CTMS-4337", "CTMS-7", "CTMS-404"):
            usage.record_once(session, "cited", ["pb-1"], ticket_key=ticket, source="agent:a")
        counted = lifecycle.get(session, "pb-1").cites
    assert counted == 2  # the Jira issue and the PR's ticket; not the one nobody sent


def test_the_cli_reports_weigh_like_the_api(cli, lessons: Engine) -> None:
    result = cli("usage", "record", "cited", "--ids", "pb-1", "--ticket", "FAKE-1", "--failure")
    assert result.exit_code == 0
    assert "unknown_ticket" in result.stdout
    with transaction(lessons) as session:
        assert lifecycle.get(session, "pb-1").cites_failure == 0


def test_writes_past_the_limit_answer_429_with_retry_after_across_processes(
    engine: Engine, database_url: str, lessons: Engine
) -> None:
    # Two apps on one database stand for two gunicorn workers: the count is shared.
    workers = [
        create_app(settings_for(database_url, 3), engine=engine).test_client() for _ in range(2)
    ]
    cite = {"event": "cited", "lessonIds": ["pb-1"], "ticketId": "FAKE-1", "phaseSuccess": False}
    proposal = {"text": "Always pin the API version header", "learned_from": "CTMS-1"}
    answers = [
        workers[0].post("/api/v1/usage", json=cite, headers=MALLORY),
        workers[1].post("/api/v1/lessons", json=proposal, headers=MALLORY),
        workers[0].post("/api/v1/usage", json=cite, headers=MALLORY),
        workers[1].post("/api/v1/usage", json=cite, headers=MALLORY),
    ]
    assert [a.status_code for a in answers] == [201, 201, 201, 429]
    refused = answers[-1]
    assert refused.mimetype == "application/problem+json"
    assert 1 <= int(refused.headers["Retry-After"]) <= 60
    assert "PLAYBOOK_AGENT_WRITES_PER_MINUTE" in refused.get_json()["detail"]
    again = workers[0].post("/api/v1/lessons", json=proposal, headers=MALLORY)
    assert again.status_code == 429
    # Another token has its own count, and the maintainer is not limited.
    assert workers[0].post("/api/v1/usage", json=cite, headers=EVE).status_code == 201
    for _ in range(5):
        assert workers[1].post("/api/v1/usage", json=cite, headers=MAINTAINER).status_code == 201


def test_the_limit_starts_again_with_the_next_minute(engine: Engine) -> None:
    start = clock.now().replace(second=10, microsecond=0)
    verdicts = [rate_limits.hit(engine, "writes:agent:x", 2, now=start) for _ in range(3)]
    assert [v.allowed for v in verdicts] == [True, True, False]
    assert verdicts[-1].retry_after == 50
    next_minute = rate_limits.hit(engine, "writes:agent:x", 2, now=start + timedelta(minutes=1))
    assert next_minute.allowed
    with transaction(engine) as session:
        assert len(list(session.scalars(select(RateWindow)))) == 1  # the old window swept


def test_mcp_writes_past_the_limit_are_a_tool_error_saying_when_to_retry(
    engine: Engine, database_url: str, lessons: Engine
) -> None:
    caller = agents.Caller(actor="agent:mallory", role="agent")
    server = build_server(settings_for(database_url, 2), lambda: engine, lambda _ctx: caller)
    cite = {"ticket": "FAKE-1", "lesson_ids": ["pb-1"], "kind": "cited"}

    async def session() -> None:
        async with Client(server) as client:
            first = await client.call_tool("record_usage", cite)
            assert first.structured_content["discounted"] == {"unknown_ticket": 1}
            assert not (await client.call_tool("record_usage", cite)).is_error
            refused = await client.call_tool("record_usage", cite)
            assert refused.is_error
            text = " ".join(block.text for block in refused.content)
            assert "rate limit" in text and "retry in" in text
            # Reading is not limited.
            assert not (await client.call_tool("get_lesson", {"id": "pb-1"})).is_error

    anyio.run(session)


def test_the_docs_state_the_bound_the_rule_keeps() -> None:

    readme = (ROOT / "docs" / "security.md").read_text(encoding="utf-8")
    assert Fraction(1, 6) == self_reports.MAX_CONFIDENCE_SHIFT
    assert self_reports.RATINGS_PER_SOURCE == 1
    assert "at most one rating" in readme and "1/6" in readme
    assert "PLAYBOOK_AGENT_WRITES_PER_MINUTE" in readme
    assert ranking.confidence(1, 0) - ranking.confidence(1, 1) == pytest.approx(1 / 6)


def test_searching_for_an_invented_ticket_keeps_no_lesson_from_pruning(
    api: Any, lessons: Engine
) -> None:
    body = {"query": "Retry Stripe webhooks idempotency key", "ticket": "FAKE-7"}
    answer = api.post("/api/v1/search", json=body, headers=MALLORY).get_json()
    assert "pb-1" in [lesson["id"] for lesson in answer["lessons"]]
    _, _, prunable_now, _ = report(lessons)
    assert "pb-1" in prunable_now

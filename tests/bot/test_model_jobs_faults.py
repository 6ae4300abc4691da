"""The rating job when the model fails: the job row says why, nothing is lost or repeated."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import Engine

from playbook import clock
from playbook.db import transaction
from playbook.lessons import lifecycle
from tests.bot.model_jobs_world import (
    MODEL,
    World,
    deliveries,
    job_id,
    lesson,
    pr_key,
    ratings,
    ratings_answer,
    start_world,
    usage,
)
from tests.fakes.model import invalid_json, rate_limited, server_error, slow
from tests.fakes.server import Failure

GOOD = ratings_answer(("pb-2", 1.0), ("pb-3", -0.5))
WRONG_KEY = "sk-wrong-" + "Zx8Cv6Bn4Mq2Wd0Fr9Gt7Hy5"


@pytest.fixture
def world(engine: Engine, database_url: str) -> Iterator[World]:
    running = start_world(engine, database_url)
    yield running
    running.stop()


def closed(world: World, number: int = 2) -> None:
    """PR ``number`` for CTMS-4337 merges citing pb-1 (PR 2: after the lessons were shown)."""
    if number == 2:
        world.seed()
        world.show_ticket()
    world.pull(number)
    world.close(number)


def later(**delta: float) -> None:
    """Move the bot's clock forward by ``delta`` from now (the worker reads this clock)."""
    shift = timedelta(**delta)
    clock.set_clock(lambda: datetime.now(UTC) + shift)


def shown(cli: Any, number: int = 2) -> dict[str, Any]:
    """The PR's rating job as `playbook-bot deliveries show` shows it."""
    result = cli("deliveries", "show", job_id(number))
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def outcome_stands(world: World) -> None:
    """The close is done and its outcome is what it is without a model."""
    assert [d.status for d in deliveries(world.engine, "pull_request")] == ["done"] * len(
        deliveries(world.engine, "pull_request")
    )
    cited = lesson(world.engine, "pb-1")
    assert (cited["status"], cited["cites_success"], cited["cites_failure"]) == ("active", 1, 0)
    for other in ("pb-2", "pb-3"):
        assert (lesson(world.engine, other)["status"], lesson(world.engine, other)["cites"]) == (
            "active",
            0,
        )


def rated_once(world: World) -> None:
    """The good answer's ratings, stored once, counted once."""
    assert [r[:3] for r in ratings(world.engine)] == [
        ("pb-2", pr_key(2), 1.0),
        ("pb-3", pr_key(2), -0.5),
    ]
    assert [
        (lesson(world.engine, b)["ratings"], lesson(world.engine, b)["rating_sum"])
        for b in (
            "pb-2",
            "pb-3",
        )
    ] == [(1, 1.0), (1, -0.5)]


def at(value: str) -> datetime:
    """A time as `deliveries show` prints it."""
    return datetime.fromisoformat(value)


def test_a_slow_model_fails_the_job_for_a_retry_which_succeeds_once_it_answers(
    engine: Engine, database_url: str, cli: Any
) -> None:
    world = start_world(engine, database_url, PLAYBOOK_MODEL_TIMEOUT_SECONDS=1)
    try:
        closed(world)
        world.model.queue(slow(3, GOOD))
        now = datetime.now(UTC)
        with clock.frozen(now):  # the bot's clock; the client's timeout runs on real time
            assert world.run_model_jobs() == 1
            job = shown(cli)
            assert (job["status"], job["error_kind"], job["attempts"]) == (
                "failed",
                "transient",
                1,
            )
            assert "timeout" in job["last_error"] and "no answer after 1s" in job["last_error"]
            # PLAYBOOK_RETRY_BASE_SECONDS=1: the first retry a second later.
            assert at(job["next_attempt_at"]) == now + timedelta(seconds=1)
            assert ratings(world.engine) == []
            outcome_stands(world)
            world.model.answer_with(lambda _body: GOOD)  # the model is back
            assert world.run_model_jobs() == 0  # not before its time
        later(seconds=5)
        assert world.run_model_jobs() == 1
        assert shown(cli)["status"] == "done"
        rated_once(world)
        assert len(world.model.chat_requests()) == 2
        [(_, calls, _, failures)] = usage(world.engine)
        assert (calls, failures) == (2, 1)
        outcome_stands(world)
    finally:
        world.stop()


@pytest.mark.parametrize(
    "fault, said",
    [
        (server_error(500), "unavailable: HTTP 500"),
        (server_error(503), "unavailable: HTTP 503"),
    ],
)
def test_a_server_error_is_transient_and_the_retry_rates_once(
    world: World, cli: Any, fault: Any, said: str
) -> None:
    closed(world)
    world.model.queue(fault)
    world.model.answer_with(lambda _body: GOOD)
    world.run_model_jobs()

    job = shown(cli)
    assert (job["status"], job["error_kind"], job["attempts"]) == ("failed", "transient", 1)
    assert said in job["last_error"]
    assert ratings(world.engine) == []

    later(seconds=5)
    assert world.run_model_jobs() == 1
    assert shown(cli)["status"] == "done"
    rated_once(world)
    outcome_stands(world)


def test_a_429_waits_for_its_retry_after_without_counting_an_attempt(
    world: World, cli: Any
) -> None:
    closed(world)
    world.model.queue(*[rate_limited("120")] * 6)
    world.model.answer_with(lambda _body: GOOD)
    now = datetime.now(UTC)
    with clock.frozen(now):
        world.run_model_jobs()
        job = shown(cli)
        assert (job["status"], job["error_kind"], job["attempts"]) == ("failed", "rate_limited", 0)
        assert "HTTP 429" in job["last_error"] and "120s" in job["last_error"]
        assert at(job["next_attempt_at"]) == now + timedelta(seconds=120)
    with clock.frozen(now + timedelta(seconds=119)):
        assert world.run_model_jobs() == 0  # it waits
    assert len(world.model.chat_requests()) == 1

    # More 429s than the attempts a job has: waiting is never a failure, it never goes dead.
    for minutes in range(2, 12, 2):
        later(minutes=minutes)
        assert world.run_model_jobs() == 1
        job = shown(cli)
        assert (job["status"], job["attempts"]) == ("failed", 0)
    later(minutes=13)
    assert world.run_model_jobs() == 1
    assert shown(cli)["status"] == "done"
    rated_once(world)
    assert len(world.model.chat_requests()) == 7
    outcome_stands(world)


@pytest.mark.parametrize("retry_after, wait", [(None, 60), ("7", 7)])
def test_a_429_waits_as_long_as_it_says_or_a_minute(
    world: World, cli: Any, retry_after: str | None, wait: int
) -> None:
    closed(world)
    world.model.queue(rate_limited(retry_after))
    now = datetime.now(UTC)
    with clock.frozen(now):
        world.run_model_jobs()
    job = shown(cli)
    assert (job["status"], job["error_kind"], job["attempts"]) == ("failed", "rate_limited", 0)
    assert at(job["next_attempt_at"]) == now + timedelta(seconds=wait)


def test_an_unusable_answer_twice_is_dead_with_the_reason_and_a_replay_rates_once(
    world: World, cli: Any
) -> None:
    closed(world)
    world.model.queue(invalid_json(), invalid_json("I rated them all, they are great."))
    world.run_model_jobs()

    job = shown(cli)
    assert (job["status"], job["error_kind"]) == ("dead", "permanent")
    assert "the answer was not the JSON asked for, twice: not valid JSON" in job["last_error"]
    assert "set PLAYBOOK_MODEL to a model that follows JSON mode" in job["last_error"]
    assert "deliveries replay" in job["last_error"]
    assert len(world.model.chat_requests()) == 2  # asked again once, then given up
    # The second request showed the model its unusable answer and why.
    assert "That answer was not usable: not valid JSON" in world.prompts()[1]
    assert ratings(world.engine) == []
    later(hours=2)
    assert world.run_model_jobs() == 0  # dead stays dead
    outcome_stands(world)

    world.model.answer_with(lambda _body: GOOD)  # a model that follows JSON mode
    assert cli("deliveries", "replay", job_id(2)).exit_code == 0
    assert world.run_model_jobs() == 1
    assert shown(cli)["status"] == "done"
    rated_once(world)


def test_a_refused_key_is_dead_naming_the_key_never_its_value(
    engine: Engine, database_url: str, cli: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    world = start_world(engine, database_url, PLAYBOOK_MODEL_API_KEY=WRONG_KEY)
    try:
        closed(world)
        world.run_model_jobs()

        job = shown(cli)
        assert (job["status"], job["error_kind"]) == ("dead", "permanent")
        assert "the API key was refused; check PLAYBOOK_MODEL_API_KEY" in job["last_error"]
        assert len(world.model.chat_requests()) == 1  # never retried by itself
        # The fake model's 401 quotes the key it got; nothing the bot keeps or says does.
        listing = cli("deliveries", "list")
        for text in (json.dumps(job), listing.output, caplog.text):
            assert WRONG_KEY not in text and WRONG_KEY[:12] not in text
        assert ratings(world.engine) == []
        outcome_stands(world)
    finally:
        world.stop()


def test_an_unknown_model_is_dead_naming_the_model(
    engine: Engine, database_url: str, cli: Any
) -> None:
    world = start_world(engine, database_url, PLAYBOOK_MODEL="no-such-model")
    try:
        closed(world)
        world.run_model_jobs()
        job = shown(cli)
        assert (job["status"], job["error_kind"]) == ("dead", "permanent")
        assert "HTTP 404" in job["last_error"] and "no-such-model" in job["last_error"]
        assert "set PLAYBOOK_MODEL to a model the endpoint serves" in job["last_error"]
        outcome_stands(world)
    finally:
        world.stop()


def test_ratings_of_lessons_not_asked_about_are_dropped(world: World, cli: Any) -> None:
    closed(world)
    with transaction(world.engine) as session:  # pb-4 exists, but was never shown for the PR
        lifecycle.add(session, "Pin chromium in CI", learned_from="OPS-1", scope="OPS", actor="t")
    world.model.queue(
        json.dumps(
            {
                "ratings": [
                    {"id": "pb-999", "score": 1, "reason": "made up"},
                    {"id": "pb-1", "score": 1, "reason": "cited, so not asked"},
                    {"id": "pb-4", "score": -1, "reason": "not shown"},
                    {"id": "PB-2", "score": 0.5, "reason": "asked"},
                    {"id": "pb-2", "score": -1, "reason": "asked twice"},
                ]
            }
        )
    )
    world.run_model_jobs()

    assert shown(cli)["status"] == "done"
    assert [r[:4] for r in ratings(world.engine)] == [("pb-2", pr_key(2), 0.5, "asked")]
    for other in ("pb-1", "pb-3", "pb-4"):
        assert lesson(world.engine, other)["ratings"] == 0
    assert (
        lesson(world.engine, "pb-2")["ratings"],
        lesson(world.engine, "pb-2")["rating_sum"],
    ) == (
        1,
        0.5,
    )
    outcome_stands(world)


def test_a_score_out_of_range_is_refused_and_the_model_asked_again(world: World, cli: Any) -> None:
    closed(world)
    world.model.queue(ratings_answer(("pb-2", 5.0), ("pb-3", -0.5)), GOOD)
    world.run_model_jobs()

    assert shown(cli)["status"] == "done"
    assert "ratings.0.score" in world.prompts()[1]  # told what was wrong, not the values
    rated_once(world)  # the second answer's ratings; nothing of the first


def test_scores_out_of_range_twice_store_nothing(world: World, cli: Any) -> None:
    closed(world)
    world.model.answer_with(lambda _body: ratings_answer(("pb-2", 1.5), ("pb-3", -7)))
    world.run_model_jobs()

    job = shown(cli)
    assert (job["status"], job["error_kind"]) == ("dead", "permanent")
    assert "not the shape asked for" in job["last_error"] and "score" in job["last_error"]
    assert ratings(world.engine) == []
    assert [lesson(world.engine, b)["ratings"] for b in ("pb-2", "pb-3")] == [0, 0]
    outcome_stands(world)


@pytest.mark.parametrize(
    "setting, value, said",
    [
        ("PLAYBOOK_MODEL_DAILY_CALLS", 1, "the daily budget of 1 model calls is spent"),
        ("PLAYBOOK_MODEL_DAILY_TOKENS", 10, "the daily budget of 10 model tokens is spent"),
    ],
)
def test_a_spent_daily_budget_defers_the_next_job_to_the_next_utc_day(
    engine: Engine, database_url: str, cli: Any, setting: str, value: int, said: str
) -> None:
    world = start_world(engine, database_url, **{setting: value})
    try:
        world.model.answer_with(lambda _body: GOOD)
        closed(world, 2)
        assert world.run_model_jobs() == 1
        assert shown(cli, 2)["status"] == "done"
        closed(world, 3)
        assert world.run_model_jobs() == 1

        job = shown(cli, 3)
        assert (job["status"], job["error_kind"], job["attempts"]) == ("failed", "rate_limited", 0)
        assert said in job["last_error"] and "next UTC day" in job["last_error"]
        today = datetime.now(UTC)
        midnight = datetime(today.year, today.month, today.day, tzinfo=UTC) + timedelta(days=1)
        assert datetime.fromisoformat(job["next_attempt_at"]) == midnight
        assert len(world.model.chat_requests()) == 1  # the model was not asked
        [(day, calls, tokens, failures)] = usage(world.engine)
        assert (day, calls, failures) == (today.strftime("%Y-%m-%d"), 1, 0)
        assert tokens == world.model.usages[0]["total_tokens"]
        assert world.run_model_jobs() == 0

        # The next UTC day the budget is whole again.
        later(seconds=(midnight - datetime.now(UTC)).total_seconds() + 60)
        assert world.run_model_jobs() == 1
        assert shown(cli, 3)["status"] == "done"
        assert len(world.model.chat_requests()) == 2
        assert [u[:2] for u in usage(world.engine)] == [
            (today.strftime("%Y-%m-%d"), 1),
            (midnight.strftime("%Y-%m-%d"), 1),
        ]
        assert {r[1] for r in ratings(world.engine)} == {pr_key(2), pr_key(3)}
    finally:
        world.stop()


def test_a_pr_gone_from_github_is_ignored_without_asking_the_model(world: World, cli: Any) -> None:
    closed(world)
    del world.github.pulls[("Codertocat/Hello-World", 2)]
    world.run_model_jobs()
    job = shown(cli)
    assert job["status"] == "ignored" and "is gone from GitHub" in job["reason"]
    assert world.model.requests == []
    outcome_stands(world)


def test_github_failing_on_the_pr_read_is_transient_and_the_model_is_not_asked(
    world: World, cli: Any
) -> None:
    closed(world)
    path = "/repos/Codertocat/Hello-World/pulls/2/commits"
    world.github.failures.append(Failure("GET", path, 502, times=1))
    world.model.answer_with(lambda _body: GOOD)
    world.run_model_jobs()

    job = shown(cli)
    assert (job["status"], job["error_kind"]) == ("failed", "transient")
    assert world.model.chat_requests() == []
    later(seconds=5)
    world.run_model_jobs()
    assert shown(cli)["status"] == "done"
    rated_once(world)
    assert MODEL in {r[4] for r in ratings(world.engine)}

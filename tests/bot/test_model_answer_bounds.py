"""A model answer of any shape is read in linear time, and no answer spends more budget than
its request could: hostile fences, unclosed thoughts, huge answers and inflated usage."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pydantic
import pytest
from sqlalchemy import Engine

from bot.model_client import (
    MAX_ANSWER_CHARS,
    ModelError,
    _json_text,
    ask_json,
    charged,
    make_client,
    most_prompt_tokens,
)
from tests.bot.model_jobs_world import pr_key, ratings, ratings_answer, start_world, usage
from tests.fakes.model import FakeModel, Reply
from tests.support import hang_guard

KEY = "sk-model-secret-1234567890"
# Many times what reading even the largest answer takes on a loaded machine: only a hang fails.
HANG_SECONDS = 60


class Verdict(pydantic.BaseModel):
    ok: bool


def worst_shapes(size: int) -> dict[str, str]:
    """Answers of about ``size`` characters shaped to make a backtracking parser spin."""
    return {
        "fence, newlines, then text": "```json" + "\n" * size + "x",
        "fence, newlines, no close": "```json\n" + "\n" * size + "{}",
        "fence, spaces and newlines": "```json" + " \n" * (size // 2) + "x```x",
        "fence, blanks before a close": "```json\n{}" + " \t\n" * (size // 3) + "``` x",
        "nested fences": "```json\n" * (size // 16) + "{}" + "\n```" * (size // 8),
        "fences only": "`" * size,
        "unclosed thoughts": "<think>" + "\n" * size + "{}",
        "think tags only": "<think>" * (size // 7),
        "closing thought tags": "</think>" * (size // 8),
        "whitespace runs": " \t\r\n\f\v" * (size // 6) + "{}",
        "letters after a fence": "```" + "a" * size,
    }


@pytest.mark.parametrize("size", [1_000, 50_000, MAX_ANSWER_CHARS - 100])
def test_the_worst_shapes_are_read_without_backtracking(size: int) -> None:
    for name, content in worst_shapes(size).items():
        assert len(content) <= MAX_ANSWER_CHARS
        with hang_guard(HANG_SECONDS, f"reading the answer {name!r} of {len(content):,} chars"):
            got = _json_text(content)
        assert len(got) <= len(content)


def test_fences_and_thoughts_are_still_taken_off() -> None:
    body = '{"ok": true}'
    assert _json_text(f"```json\n{body}\n```") == body
    assert _json_text(f"  ```\n{body}```  ") == body
    assert _json_text(f"<think>maybe ```json```</think>\n```JSON \n{body}\n  ```") == body
    assert _json_text(f"```json {body}```") == f"```json {body}```"  # no line: not a fence
    assert _json_text(f"<think>never closed {body}") == f"<think>never closed {body}"


def test_an_answer_over_the_cap_is_refused_unread() -> None:
    with pytest.raises(ValueError, match="over the 200,000 an answer may have"):
        _json_text("```json" + "\n" * MAX_ANSWER_CHARS + "x")


@pytest.fixture
def fake() -> Iterator[FakeModel]:
    server = FakeModel(api_key=KEY)
    server.start()
    try:
        yield server
    finally:
        server.stop()


def ask(fake: FakeModel, max_tokens: int = 64) -> Any:
    client = make_client(fake.base_url, KEY, 30.0)
    messages = [{"role": "user", "content": "Is this fine? Answer in JSON."}]
    return ask_json(client, "test-model", messages, Verdict, max_tokens=max_tokens)


def test_a_hostile_fence_from_the_server_is_a_bad_answer_not_a_hang(fake: FakeModel) -> None:
    hostile = Reply(content="```json" + "\n" * 100_000 + "x", past_limit=True)
    fake.queue(hostile, hostile)

    with hang_guard(HANG_SECONDS, "two hostile answers"), pytest.raises(ModelError) as raised:
        ask(fake)

    assert raised.value.reason == "bad_answer"
    assert len(fake.chat_requests()) == 2


def test_a_huge_answer_with_inflated_usage_counts_at_most_what_was_asked(
    fake: FakeModel,
) -> None:
    # 10 MB past max_tokens, and a usage of 2.5 M tokens: what the round's server sent.
    inflated = {"prompt_tokens": 500_000, "completion_tokens": 2_000_000, "total_tokens": 2_500_000}
    huge = Reply(content="x" * 10_000_000, past_limit=True, usage=inflated)
    fake.queue(huge, huge)

    with hang_guard(HANG_SECONDS, "two 10 MB answers"), pytest.raises(ModelError) as raised:
        ask(fake, max_tokens=64)

    error = raised.value
    assert error.reason == "bad_answer" and "over the 200,000" in error.detail
    assert error.usage.calls == 2
    # Each request counts its completion at max_tokens and its prompt at its bytes at most.
    prompts = [json.dumps(body["messages"]) for body in fake.chat_requests()]
    assert error.usage.completion_tokens <= 2 * 64
    assert error.usage.prompt_tokens <= sum(len(p.encode()) for p in prompts)
    assert error.usage.total_tokens < 20_000


def test_honest_usage_is_counted_as_reported(fake: FakeModel) -> None:
    fake.queue('{"ok": true}')

    got = ask(fake)

    reported = fake.usages[0]
    assert (got.usage.prompt_tokens, got.usage.completion_tokens) == (
        reported["prompt_tokens"],
        reported["completion_tokens"],
    )


@pytest.mark.parametrize(
    ("prompt", "completion", "expected"),
    [
        (10, 5, (10, 5)),
        (10**9, 10**9, (most_prompt_tokens(["hello"]), 100)),
        (-3, "many", (0, 0)),
        (None, True, (0, 0)),
    ],
)
def test_charged_bounds_what_a_server_says(prompt: Any, completion: Any, expected: Any) -> None:
    got = charged(prompt, completion, most_prompt=most_prompt_tokens(["hello"]), max_tokens=100)
    assert (got.calls, got.prompt_tokens, got.completion_tokens) == (1, *expected)


def test_a_refused_huge_answer_leaves_the_daily_budget_for_the_next_job(
    engine: Engine, database_url: str
) -> None:
    inflated = {"prompt_tokens": 500_000, "completion_tokens": 2_000_000, "total_tokens": 2_500_000}
    huge = Reply(content="x" * 10_000_000, past_limit=True, usage=inflated)
    world = start_world(engine, database_url, PLAYBOOK_MODEL_DAILY_TOKENS=100_000)
    try:
        world.model.queue(huge, huge)
        world.model.answer_with(lambda _body: ratings_answer(("pb-2", 1.0), ("pb-3", -0.5)))
        world.seed()
        world.show_ticket()
        world.pull(2)
        world.close(2)
        with hang_guard(HANG_SECONDS, "a rating job answered 10 MB twice"):
            assert world.run_model_jobs() == 1
        [(_, calls, tokens, failures)] = usage(world.engine)
        assert (calls, failures) == (2, 1)
        assert tokens < 100_000  # not the 5 M tokens reported: the day's budget is not spent

        world.pull(3)
        world.close(3)
        assert world.run_model_jobs() == 1
        # The next job is asked and rated the same day: not deferred for a spent budget.
        assert {r[1] for r in ratings(world.engine)} == {pr_key(3)}
        today = datetime.now(UTC).strftime("%Y-%m-%d")
        assert usage(world.engine)[0][:2] == (today, 3)
    finally:
        world.stop()

"""`/metrics` after questions to the model: requests, tokens and time, by purpose and outcome."""

from __future__ import annotations

from collections.abc import Iterator

import pydantic
import pytest

from bot import metrics
from bot.model_client import ModelError, ask_json, make_client
from tests.bot.test_metrics import scrape, value
from tests.fakes.model import FakeModel, invalid_json, rate_limited

KEY = "sk-metrics-model-key-0123456789"
ASK = [{"role": "user", "content": "Did this work use the lesson? Answer in JSON."}]


class Rating(pydantic.BaseModel):
    score: float
    reason: str


@pytest.fixture
def fake() -> Iterator[FakeModel]:
    server = FakeModel(api_key=KEY)
    server.start()
    try:
        yield server
    finally:
        server.stop()


def ask(fake: FakeModel, key: str = KEY) -> object:
    """One question as a job asks it, recorded as the job records it."""
    client = make_client(fake.base_url, key, 5.0)
    try:
        result = ask_json(client, "test-model", ASK, Rating, max_tokens=200)
    except ModelError as error:
        metrics.model_call("rating", error)
        return error
    metrics.model_call("rating", result)
    return result


def test_answers_and_failures_are_counted_with_their_tokens_and_time(
    client, fake: FakeModel
) -> None:
    before = scrape(client)
    good = {"score": 0.5, "reason": "followed it"}
    # An answer, an answer on the retry after broken JSON, a 429, a refused key.
    fake.queue(good, invalid_json(), good, rate_limited("3"))
    assert not isinstance(ask(fake), ModelError)
    assert not isinstance(ask(fake), ModelError)
    limited = ask(fake)
    refused = ask(fake, key="sk-wrong-key-000000000")
    assert isinstance(limited, ModelError) and limited.reason == "rate_limited"
    assert isinstance(refused, ModelError) and refused.reason == "auth"
    after = scrape(client)

    def grew(name: str, **labels: str) -> float:
        return value(after, name, **labels) - value(before, name, **labels)

    calls = "playbook_model_calls_total"
    # Requests, as the daily budget counts them: the retry is a request of its own.
    assert grew(calls, purpose="rating", outcome="ok") == 3
    assert grew(calls, purpose="rating", outcome="rate_limited") == 1
    assert grew(calls, purpose="rating", outcome="auth") == 1
    tokens = "playbook_model_tokens_total"
    answered = fake.usages  # what the server reported for each completion it answered
    assert len(answered) == 3
    prompt = sum(u["prompt_tokens"] for u in answered)
    completion = sum(u["completion_tokens"] for u in answered)
    assert grew(tokens, purpose="rating", kind="prompt") == prompt
    assert grew(tokens, purpose="rating", kind="completion") == completion
    # One observation a question, however many requests it took.
    assert grew("playbook_model_call_seconds_count", purpose="rating") == 4
    assert grew("playbook_model_call_seconds_bucket", purpose="rating", le="+Inf") == 4
    assert grew("playbook_model_call_seconds_sum", purpose="rating") > 0


def test_an_unknown_purpose_is_counted_as_other(client, fake: FakeModel) -> None:
    before = scrape(client)
    fake.queue({"score": 1, "reason": "yes"})
    result = ask_json(
        make_client(fake.base_url, KEY, 5.0), "test-model", ASK, Rating, max_tokens=99
    )

    metrics.model_call("a purpose nobody declared", result)

    after = scrape(client)
    name = "playbook_model_calls_total"
    labels = {"purpose": "other", "outcome": "ok"}
    assert value(after, name, **labels) - value(before, name, **labels) == 1
    assert not any("nobody declared" in str(key) for key in after)

"""The fake model server, driven by the real ``openai`` client: what it sees is a real server's."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import openai
import pytest

from tests.fakes.model import (
    FakeModel,
    Reply,
    answer,
    broken_body,
    invalid_json,
    rate_limited,
    server_error,
    slow,
)

JSON_ASK = [
    {"role": "system", "content": "Answer with one JSON object."},
    {"role": "user", "content": "Is this a rule: never log the key?"},
]


@pytest.fixture
def fake() -> Iterator[FakeModel]:
    server = FakeModel(models=("test-model", "org/other:7b"))
    server.start()
    try:
        yield server
    finally:
        server.stop()


def client_for(fake: FakeModel, *, api_key: str = "model-key", timeout: float = 5.0):
    return openai.OpenAI(base_url=fake.base_url, api_key=api_key, timeout=timeout, max_retries=0)


def ask(fake: FakeModel, **kwargs: Any):
    params: dict[str, Any] = {
        "model": "test-model",
        "messages": JSON_ASK,
        "response_format": {"type": "json_object"},
    }
    params.update(kwargs)
    return client_for(fake).chat.completions.create(**params)


def test_a_chat_completion_has_the_real_shape_and_usage(fake: FakeModel) -> None:
    fake.queue({"rule": True})

    completion = ask(fake, temperature=0, max_tokens=50)

    assert completion.object == "chat.completion"
    assert completion.model == "test-model"
    [choice] = completion.choices
    assert choice.finish_reason == "stop"
    assert choice.message.role == "assistant"
    assert json.loads(choice.message.content or "") == {"rule": True}
    assert completion.usage is not None
    assert completion.usage.prompt_tokens > 0
    assert completion.usage.completion_tokens > 0
    assert completion.usage.total_tokens == (
        completion.usage.prompt_tokens + completion.usage.completion_tokens
    )
    [sent] = fake.chat_requests()
    assert sent["messages"] == JSON_ASK
    assert sent["response_format"] == {"type": "json_object"}
    assert (sent["temperature"], sent["max_tokens"]) == (0, 50)
    assert fake.calls("POST")[0].headers["Authorization"] == "Bearer model-key"


def test_answers_come_from_the_queue_in_order_then_from_the_responder(fake: FakeModel) -> None:
    fake.queue("first", answer({"n": 2}))
    fake.answer_with(lambda body: {"echo": body["messages"][-1]["content"]})

    contents = [ask(fake).choices[0].message.content for _ in range(3)]

    assert contents[:2] == ["first", '{"n": 2}']
    assert json.loads(contents[2] or "") == {"echo": JSON_ASK[-1]["content"]}


def test_any_content_is_answered_as_is_an_invented_quote_or_broken_json(fake: FakeModel) -> None:
    invented = {"lessons": [{"text": "Pin the SDK", "quote": "nobody wrote this"}]}
    fake.queue(invented, invalid_json(), Reply(content=None))

    assert json.loads(ask(fake).choices[0].message.content or "") == invented
    with pytest.raises(json.JSONDecodeError):
        json.loads(ask(fake).choices[0].message.content or "")
    assert ask(fake).choices[0].message.content is None


def test_an_answer_longer_than_max_tokens_is_cut_with_finish_reason_length(
    fake: FakeModel,
) -> None:
    fake.queue({"reason": "x" * 400})

    [choice] = ask(fake, max_tokens=10).choices

    assert choice.finish_reason == "length"
    assert len(choice.message.content or "") == 40


def test_json_schema_response_format_is_accepted_and_needs_a_name(fake: FakeModel) -> None:
    schema = {"type": "object", "properties": {"ok": {"type": "boolean"}}}
    fake.queue({"ok": True})

    ok = ask(
        fake,
        response_format={"type": "json_schema", "json_schema": {"name": "Ok", "schema": schema}},
    )
    with pytest.raises(openai.BadRequestError) as error:
        ask(fake, response_format={"type": "json_schema", "json_schema": {"schema": schema}})

    assert json.loads(ok.choices[0].message.content or "") == {"ok": True}
    assert error.value.param == "response_format.json_schema.name"


def test_json_mode_without_the_word_json_is_refused_as_openai_does(fake: FakeModel) -> None:
    with pytest.raises(openai.BadRequestError) as error:
        ask(fake, messages=[{"role": "user", "content": "Is this a rule?"}])

    assert error.value.param == "messages"
    assert "json" in error.value.message


def test_models_are_listed_and_retrieved_and_an_unknown_one_is_404(fake: FakeModel) -> None:
    client = client_for(fake)

    listed = [m.id for m in client.models.list()]
    retrieved = client.models.retrieve("org/other:7b")
    with pytest.raises(openai.NotFoundError) as missing:
        client.models.retrieve("llama-nope")
    with pytest.raises(openai.NotFoundError) as chat_missing:
        ask(fake, model="llama-nope")

    assert listed == ["test-model", "org/other:7b"]
    assert (retrieved.id, retrieved.object) == ("org/other:7b", "model")
    assert missing.value.code == "model_not_found"
    assert missing.value.type == "invalid_request_error"
    assert chat_missing.value.status_code == 404


def test_a_wrong_api_key_is_401_on_every_route(fake: FakeModel) -> None:
    client = client_for(fake, api_key="wrong-key")

    with pytest.raises(openai.AuthenticationError) as chat:
        client.chat.completions.create(model="test-model", messages=JSON_ASK)
    with pytest.raises(openai.AuthenticationError):
        client.models.list()

    assert chat.value.status_code == 401
    assert chat.value.code == "invalid_api_key"


def test_a_server_without_keys_accepts_any(fake: FakeModel) -> None:
    fake.api_key = None

    completion = client_for(fake, api_key="anything").chat.completions.create(
        model="test-model", messages=JSON_ASK
    )

    assert completion.choices[0].message.content == "{}"


def test_429_raises_rate_limit_error_with_retry_after_readable(fake: FakeModel) -> None:
    fake.queue(rate_limited("12"), rate_limited(None))

    with pytest.raises(openai.RateLimitError) as limited:
        ask(fake)
    with pytest.raises(openai.RateLimitError) as bare:
        ask(fake)

    assert limited.value.status_code == 429
    assert limited.value.response.headers["retry-after"] == "12"
    assert limited.value.code == "rate_limit_exceeded"
    assert "retry-after" not in bare.value.response.headers


@pytest.mark.parametrize("status", [500, 503])
def test_a_5xx_raises_internal_server_error(fake: FakeModel, status: int) -> None:
    fake.queue(server_error(status))

    with pytest.raises(openai.InternalServerError) as error:
        ask(fake)

    assert error.value.status_code == status
    assert error.value.type == "server_error"


def test_an_answer_slower_than_the_timeout_raises_api_timeout_error(fake: FakeModel) -> None:
    fake.queue(slow(5.0))

    with pytest.raises(openai.APITimeoutError):
        client_for(fake, timeout=0.3).chat.completions.create(model="test-model", messages=JSON_ASK)

    assert len(fake.chat_requests()) == 1


def test_a_slow_answer_within_the_timeout_arrives(fake: FakeModel) -> None:
    fake.queue(slow(0.2, {"ok": True}))

    completion = ask(fake)

    assert json.loads(completion.choices[0].message.content or "") == {"ok": True}


def test_a_body_that_is_not_json_reaches_the_client_as_text(fake: FakeModel) -> None:
    fake.queue(broken_body())

    completion: Any = ask(fake)

    # The client does not raise: it hands back the text, which has no choices.
    assert not hasattr(completion, "choices")


def test_a_stopped_server_is_a_connection_error(fake: FakeModel) -> None:
    client = client_for(fake)
    fake.stop()

    with pytest.raises(openai.APIConnectionError):
        client.chat.completions.create(model="test-model", messages=JSON_ASK)

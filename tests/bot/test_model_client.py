"""The model client against the fake OpenAI-compatible server: answers, faults, one retry."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from importlib.metadata import version

import pydantic
import pytest
from packaging.requirements import Requirement

from bot.model_client import (
    ModelError,
    ask_json,
    check,
    make_client,
    retry_after_seconds,
)
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
from tests.support import ROOT

KEY = "sk-model-secret-1234567890"
# A sentence of the prompt that must never reach an error message.
PROMPT = "Reviewer said: never call the v1 client here, it drops retries."


class Quote(pydantic.BaseModel):
    text: str
    quote: str


class Lessons(pydantic.BaseModel):
    lessons: list[Quote]


GOOD = {"lessons": [{"text": "Use the v2 client", "quote": "never call the v1 client here"}]}


@pytest.fixture
def fake() -> Iterator[FakeModel]:
    server = FakeModel(models=("test-model", "llama3.2:latest"), api_key=KEY)
    server.start()
    try:
        yield server
    finally:
        server.stop()


def messages() -> list[dict[str, str]]:
    return [
        {"role": "system", "content": "You turn review feedback into lessons."},
        {"role": "user", "content": PROMPT},
    ]


def ask(fake: FakeModel, *, key: str = KEY, timeout: float = 5.0, **kwargs):
    client = make_client(fake.base_url, key, timeout)
    return ask_json(client, "test-model", messages(), Lessons, max_tokens=500, **kwargs)


def fails(fake: FakeModel, **kwargs) -> ModelError:
    with pytest.raises(ModelError) as raised:
        ask(fake, **kwargs)
    error = raised.value
    assert KEY not in str(error)
    assert PROMPT not in str(error)
    return error


def test_a_good_answer_is_parsed_with_its_usage_and_model(fake: FakeModel) -> None:
    fake.queue(GOOD)

    got = ask(fake)

    assert got.value == Lessons.model_validate(GOOD)
    assert got.model == "test-model"
    [usage] = fake.usages
    assert (got.usage.calls, got.usage.prompt_tokens, got.usage.completion_tokens) == (
        1,
        usage["prompt_tokens"],
        usage["completion_tokens"],
    )
    assert got.usage.total_tokens == usage["total_tokens"]
    assert got.latency_s >= 0


def test_the_request_asks_for_json_with_the_schema_in_the_one_system_message(
    fake: FakeModel,
) -> None:
    fake.queue(GOOD)

    ask(fake)

    [sent] = fake.chat_requests()
    assert sent["model"] == "test-model"
    assert sent["response_format"] == {"type": "json_object"}
    assert (sent["max_tokens"], sent["temperature"]) == (500, 0.0)
    system = [m for m in sent["messages"] if m["role"] == "system"]
    assert len(system) == 1
    assert system[0]["content"].startswith("You turn review feedback into lessons.")
    assert '"quote"' in system[0]["content"]
    assert sent["messages"][-1] == {"role": "user", "content": PROMPT}


def test_without_a_system_message_one_is_added_first(fake: FakeModel) -> None:
    fake.queue(GOOD)
    client = make_client(fake.base_url, KEY, 5.0)

    ask_json(client, "test-model", [{"role": "user", "content": PROMPT}], Lessons, max_tokens=50)

    [sent] = fake.chat_requests()
    assert [m["role"] for m in sent["messages"]] == ["system", "user"]
    assert "JSON Schema" in sent["messages"][0]["content"]


def test_json_schema_mode_sends_the_schema_by_name(fake: FakeModel) -> None:
    fake.queue(GOOD)

    ask(fake, response_format="json_schema")

    [sent] = fake.chat_requests()
    assert sent["response_format"]["type"] == "json_schema"
    assert sent["response_format"]["json_schema"]["name"] == "Lessons"
    assert sent["response_format"]["json_schema"]["schema"] == Lessons.model_json_schema()


def test_invalid_json_is_retried_once_with_the_problem_then_answered(fake: FakeModel) -> None:
    fake.queue(invalid_json(), GOOD)

    got = ask(fake)

    assert got.value == Lessons.model_validate(GOOD)
    first, second = fake.chat_requests()
    assert second["messages"][: len(first["messages"])] == first["messages"]
    retry_note = second["messages"][-1]
    assert retry_note["role"] == "user"
    assert "not valid JSON" in retry_note["content"]
    assert second["messages"][-2]["role"] == "assistant"
    # Both calls count: a budget must see the tokens the bad answer cost too.
    assert got.usage.calls == 2
    assert got.usage.total_tokens == sum(u["total_tokens"] for u in fake.usages)


@pytest.mark.parametrize(
    "bad",
    [
        invalid_json(),
        answer({"lessons": [{"text": "no quote here"}]}),
        answer({"something": "else"}),
        Reply(content=None),
        answer('["a list, not an object"]'),
    ],
    ids=["not-json", "missing-field", "other-shape", "no-content", "a-list"],
)
def test_a_bad_answer_twice_is_a_bad_answer_error_after_exactly_two_calls(
    fake: FakeModel, bad: Reply
) -> None:
    fake.queue(bad, bad, GOOD)

    error = fails(fake)

    assert error.reason == "bad_answer"
    assert not error.transient
    assert len(fake.chat_requests()) == 2
    assert error.usage.calls == 2


def test_a_wrong_shape_names_the_field_not_the_model_s_words(fake: FakeModel) -> None:
    secretish = "the model wrote this text"
    fake.queue(*[answer({"lessons": [{"text": secretish}]})] * 2)

    error = fails(fake)

    assert "lessons.0.quote" in str(error)
    assert secretish not in str(error)


def test_an_answer_cut_at_max_tokens_says_so_and_is_retried(fake: FakeModel) -> None:
    long_answer = {"lessons": [{"text": "x" * 3000, "quote": "y"}]}
    fake.queue(long_answer, GOOD)

    got = ask(fake)

    assert got.value == Lessons.model_validate(GOOD)
    assert "cut off at the token limit" in fake.chat_requests()[1]["messages"][-1]["content"]


@pytest.mark.parametrize(
    "content",
    [
        "```json\n" + json.dumps(GOOD) + "\n```",
        "<think>The reviewer means the v1 client.</think>\n" + json.dumps(GOOD),
        "  " + json.dumps(GOOD) + "\n",
    ],
    ids=["fenced", "thinking", "whitespace"],
)
def test_what_local_models_wrap_around_json_is_not_a_retry(fake: FakeModel, content: str) -> None:
    fake.queue(content)

    got = ask(fake)

    assert got.value == Lessons.model_validate(GOOD)
    assert len(fake.chat_requests()) == 1


def test_429_is_rate_limited_with_retry_after_and_not_retried_here(fake: FakeModel) -> None:
    fake.queue(rate_limited("12"), GOOD)

    error = fails(fake)

    assert error.reason == "rate_limited"
    assert error.retry_after == 12.0
    assert error.transient
    assert "retry after 12s" in str(error)
    assert len(fake.chat_requests()) == 1
    assert (error.usage.calls, error.usage.total_tokens) == (1, 0)


def test_429_without_retry_after_has_none(fake: FakeModel) -> None:
    fake.queue(rate_limited(None))

    error = fails(fake)

    assert (error.reason, error.retry_after) == ("rate_limited", None)


def test_retry_after_is_read_as_milliseconds_seconds_or_a_date() -> None:
    in_a_minute = format_datetime(datetime.now(UTC) + timedelta(seconds=60), usegmt=True)

    assert retry_after_seconds({"retry-after-ms": "1500", "retry-after": "9"}) == 1.5
    assert retry_after_seconds({"retry-after": "2.5"}) == 2.5
    assert 50 < (retry_after_seconds({"retry-after": in_a_minute}) or 0) <= 60
    assert retry_after_seconds({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}) == 0.0
    assert retry_after_seconds({"retry-after": "soon"}) is None
    assert retry_after_seconds({}) is None


def test_a_slow_model_is_a_timeout_after_one_call(fake: FakeModel) -> None:
    fake.queue(slow(5.0, GOOD), GOOD)

    error = fails(fake, timeout=0.3)

    assert error.reason == "timeout"
    assert "0.3s" in str(error)
    assert error.transient
    assert len(fake.chat_requests()) == 1


@pytest.mark.parametrize("status", [500, 502, 503])
def test_a_5xx_is_unavailable_after_one_call(fake: FakeModel, status: int) -> None:
    fake.queue(server_error(status), GOOD)

    error = fails(fake)

    assert error.reason == "unavailable"
    assert f"HTTP {status}" in str(error)
    assert len(fake.chat_requests()) == 1


def test_a_stopped_server_is_unavailable(fake: FakeModel) -> None:
    fake.stop()

    error = fails(fake)

    assert error.reason == "unavailable"
    assert "cannot connect" in str(error)


def test_a_page_that_is_not_a_completion_is_unavailable(fake: FakeModel) -> None:
    fake.queue(broken_body())

    error = fails(fake)

    assert error.reason == "unavailable"
    assert "not answer with a chat completion" in str(error)


def test_a_failure_on_the_retry_still_counts_the_first_call(fake: FakeModel) -> None:
    fake.queue(invalid_json(), server_error(503))

    error = fails(fake)

    assert error.reason == "unavailable"
    assert error.usage.calls == 2
    assert error.usage.total_tokens == fake.usages[0]["total_tokens"]


def test_an_unknown_model_is_not_found_naming_it(fake: FakeModel) -> None:
    client = make_client(fake.base_url, KEY, 5.0)

    with pytest.raises(ModelError) as raised:
        ask_json(client, "llama-nope", messages(), Lessons, max_tokens=50)

    assert raised.value.reason == "not_found"
    assert "llama-nope" in str(raised.value)
    assert not raised.value.transient


def test_a_request_the_server_refuses_is_bad_request_with_its_reason(fake: FakeModel) -> None:
    client = make_client(fake.base_url, KEY, 5.0)

    with pytest.raises(ModelError) as raised:
        ask_json(client, "test-model", [{"role": "robot", "content": "hi"}], Lessons, max_tokens=9)

    assert raised.value.reason == "bad_request"
    assert "HTTP 400" in str(raised.value)
    assert "messages[1].role" in str(raised.value)


def test_a_wrong_key_is_auth_and_neither_key_reaches_errors_or_logs(
    fake: FakeModel, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    wrong = "sk-wrong-key-0987654321"

    error = fails(fake, key=wrong)
    fake.queue(invalid_json(), GOOD)
    ask(fake)

    assert error.reason == "auth"
    # The fake's 401 quotes the wrong key, as OpenAI's does in part.
    assert wrong not in str(error)
    logged = caplog.text + " ".join(str(r.args) for r in caplog.records)
    assert caplog.records, "the calls were logged"
    assert wrong not in logged
    assert KEY not in logged


def test_the_environment_s_openai_key_and_url_are_never_used(
    fake: FakeModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-the-environment")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    fake.api_key = None
    fake.queue(GOOD)

    ask(fake, key="")

    [call] = fake.calls("POST")
    assert "sk-from-the-environment" not in call.headers["Authorization"]


def test_check_passes_for_a_served_model_that_answers_json(fake: FakeModel) -> None:
    client = make_client(fake.base_url, KEY, 5.0)

    assert check(client, "test-model") is None
    # Ollama lists "name:latest" for a model asked for by "name".
    assert check(client, "llama3.2") is None
    assert len(fake.chat_requests()) == 2


def test_check_names_an_unserved_model_and_what_is_served(fake: FakeModel) -> None:
    client = make_client(fake.base_url, KEY, 5.0)

    problem = check(client, "mistral")

    assert problem is not None
    assert "'mistral'" in problem
    assert "test-model" in problem
    assert "PLAYBOOK_MODEL" in problem
    assert fake.chat_requests() == []


def test_check_names_the_key_setting_and_never_the_key(fake: FakeModel) -> None:
    wrong = "sk-wrong-key-0987654321"

    problem = check(make_client(fake.base_url, wrong, 5.0), "test-model")

    assert problem is not None
    assert "PLAYBOOK_MODEL_API_KEY" in problem
    assert wrong not in problem


def test_check_names_the_url_setting_when_nothing_answers(fake: FakeModel) -> None:
    client = make_client(fake.base_url, KEY, 5.0)
    fake.stop()

    problem = check(client, "test-model")

    assert problem is not None
    assert "PLAYBOOK_MODEL_BASE_URL" in problem
    assert fake.base_url in problem


def test_check_says_v1_is_missing_from_a_base_url_without_it(fake: FakeModel) -> None:
    problem = check(make_client(fake.url, KEY, 5.0), "test-model")

    assert problem is not None
    assert "ends in /v1" in problem


def test_check_says_when_the_model_does_not_answer_json(fake: FakeModel) -> None:
    fake.queue("Sure! ok is true.")

    problem = check(make_client(fake.base_url, KEY, 5.0), "test-model")

    assert problem is not None
    assert "JSON mode" in problem


def test_check_times_out_with_the_fix(fake: FakeModel) -> None:
    fake.queue(slow(5.0))

    problem = check(make_client(fake.base_url, KEY, 0.3), "test-model")

    assert problem is not None
    assert "timeout" in problem


def test_check_never_shows_credentials_in_the_url(fake: FakeModel) -> None:
    with_credentials = fake.base_url.replace("http://", "http://user:hunter2-pass@")
    fake.stop()

    problem = check(make_client(with_credentials, KEY, 5.0), "test-model")

    assert problem is not None
    assert "hunter2-pass" not in problem


def test_importing_the_client_does_not_import_openai() -> None:
    # openai takes ~0.4 s to import; the CLI must not pay that unless a model is called.
    code = "import sys, bot.model_client; print('openai' in sys.modules)"
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )

    assert out.stdout.strip() == "False"


def test_the_installed_openai_client_is_within_the_bound_pyproject_names() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    [spec] = [Requirement(r) for r in project["dependencies"] if r.startswith("openai")]
    assert any(s.operator == "<" for s in spec.specifier), "openai needs an upper bound"
    assert spec.specifier.contains(version("openai"))

"""`playbook-bot doctor`'s model line against the fake OpenAI-compatible server; never the key."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.bot.test_doctor import FIXES, failures
from tests.fakes.model import FakeModel, invalid_json

KEY = "sk-doctor-model-key-0123456789"


@pytest.fixture
def fake() -> Iterator[FakeModel]:
    server = FakeModel(models=("test-model", "llama3.1:8b"), api_key=KEY)
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def model_env(monkeypatch: pytest.MonkeyPatch, fake: FakeModel) -> pytest.MonkeyPatch:
    """The model settings of a working endpoint, for a test to spoil one of them."""
    monkeypatch.setenv("PLAYBOOK_MODEL_BASE_URL", fake.base_url)
    monkeypatch.setenv("PLAYBOOK_MODEL", "test-model")
    monkeypatch.setenv("PLAYBOOK_MODEL_API_KEY", KEY)
    monkeypatch.setenv("PLAYBOOK_MODEL_TIMEOUT_SECONDS", "5")
    return monkeypatch


def model_line(output: str) -> str:
    [line] = [line for line in output.splitlines() if "] model: " in line]
    return line


def test_without_a_model_the_line_says_off_and_what_to_set(
    cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("PLAYBOOK_MODEL_BASE_URL", "PLAYBOOK_MODEL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("PLAYBOOK_MODEL_API_KEY", KEY)  # a key alone turns nothing on

    result = cli("doctor")

    assert result.exit_code == 0, result.output
    assert KEY not in result.output
    assert model_line(result.output) == (
        "[--  ] model: off; set PLAYBOOK_MODEL_BASE_URL and PLAYBOOK_MODEL to rate lessons "
        "and propose them from reviews with a model"
    )


def test_half_a_model_configuration_is_a_warning_naming_the_missing_setting(
    cli, model_env: pytest.MonkeyPatch, fake: FakeModel
) -> None:
    model_env.delenv("PLAYBOOK_MODEL")

    result = cli("doctor")

    assert result.exit_code == 0, result.output
    line = model_line(result.output)
    assert line.startswith("[WARN] model: off, PLAYBOOK_MODEL is not set")
    assert fake.calls() == []  # nothing is asked of an endpoint with no model to ask for


def test_a_working_endpoint_is_ok_with_its_host_and_model_and_one_tiny_call(
    cli, model_env: pytest.MonkeyPatch, fake: FakeModel
) -> None:
    result = cli("doctor")

    assert result.exit_code == 0, result.output
    line = model_line(result.output)
    assert line.startswith(f"[ok  ] model: test-model at {fake.base_url} answers JSON")
    assert "daily budget 500 calls and 1,000,000 tokens" in line
    assert "diffs are not sent" in line
    assert len(fake.chat_requests()) == 1
    assert KEY not in result.output
    assert "HTTP Request" not in result.output  # the HTTP client's own log is not the report


def test_an_ollama_name_without_its_tag_is_ok(
    cli, model_env: pytest.MonkeyPatch, fake: FakeModel
) -> None:
    model_env.setenv("PLAYBOOK_MODEL", "llama3.1:8b")

    result = cli("doctor")

    assert model_line(result.output).startswith("[ok  ] model: llama3.1:8b at ")


def test_an_unreachable_endpoint_fails_naming_the_url_setting(
    cli, model_env: pytest.MonkeyPatch, fake: FakeModel
) -> None:
    fake.stop()

    result = cli("doctor")

    assert result.exit_code == 1
    line = model_line(result.output)
    assert line.startswith("[FAIL] model: ")
    assert "PLAYBOOK_MODEL_BASE_URL" in line and fake.base_url in line
    assert KEY not in result.output


def test_an_unknown_model_fails_with_the_models_served(
    cli, model_env: pytest.MonkeyPatch, fake: FakeModel
) -> None:
    model_env.setenv("PLAYBOOK_MODEL", "mistral")

    result = cli("doctor")

    assert result.exit_code == 1
    line = model_line(result.output)
    assert line.startswith("[FAIL] model: ")
    assert "'mistral'" in line and "test-model" in line and "PLAYBOOK_MODEL" in line
    assert fake.chat_requests() == []
    assert KEY not in result.output


def test_a_refused_key_fails_naming_the_key_setting_and_shows_neither_key(
    cli, model_env: pytest.MonkeyPatch, fake: FakeModel
) -> None:
    # The fake, like OpenAI, quotes the wrong key in its 401: nothing of it may be repeated.
    wrong = "sk-wrong-model-key-9876543210"
    model_env.setenv("PLAYBOOK_MODEL_API_KEY", wrong)

    result = cli("doctor")

    assert result.exit_code == 1
    line = model_line(result.output)
    assert line.startswith("[FAIL] model: ") and "PLAYBOOK_MODEL_API_KEY" in line
    assert wrong not in result.output and KEY not in result.output


def test_a_missing_key_fails_the_same_way(
    cli, model_env: pytest.MonkeyPatch, fake: FakeModel
) -> None:
    model_env.delenv("PLAYBOOK_MODEL_API_KEY")

    result = cli("doctor")

    assert result.exit_code == 1
    assert "PLAYBOOK_MODEL_API_KEY" in model_line(result.output)


def test_a_model_that_ignores_json_mode_fails(
    cli, model_env: pytest.MonkeyPatch, fake: FakeModel
) -> None:
    fake.queue(invalid_json("Sure, ok is true."))

    result = cli("doctor")

    assert result.exit_code == 1
    assert "JSON mode" in model_line(result.output)


def test_credentials_in_the_base_url_are_never_shown(
    cli, model_env: pytest.MonkeyPatch, fake: FakeModel
) -> None:
    with_credentials = fake.base_url.replace("http://", "http://proxy-user:hunter2-proxy@")
    model_env.setenv("PLAYBOOK_MODEL_BASE_URL", with_credentials + "?token=qs-secret-42")

    result = cli("doctor")

    assert "hunter2-proxy" not in result.output
    assert "qs-secret-42" not in result.output
    assert "proxy-user" not in result.output


def test_a_budget_of_nothing_is_a_warning(
    cli, model_env: pytest.MonkeyPatch, fake: FakeModel
) -> None:
    model_env.setenv("PLAYBOOK_MODEL_DAILY_TOKENS", "0")

    result = cli("doctor")

    assert result.exit_code == 0, result.output
    line = model_line(result.output)
    assert line.startswith("[WARN] model: test-model at ")
    assert "set PLAYBOOK_MODEL_DAILY_TOKENS above 0" in line


def test_every_model_failure_names_its_fix(
    cli, model_env: pytest.MonkeyPatch, fake: FakeModel
) -> None:
    found = []
    for name, value in (
        ("PLAYBOOK_MODEL", "mistral"),
        ("PLAYBOOK_MODEL_API_KEY", "sk-another-wrong-key-1234"),
        ("PLAYBOOK_MODEL_BASE_URL", fake.url),  # no /v1
    ):
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv(name, value)
            found += failures(cli("doctor").output)
    fake.queue(invalid_json())
    found += failures(cli("doctor").output)
    fake.stop()
    found += failures(cli("doctor").output)

    assert len(found) == 5
    for line in found:
        assert line.startswith("[FAIL] model: ")
        assert any(fix in line for fix in FIXES), line


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ("localhost:11434/v1", "must be an http:// or https:// URL"),
        ("ftp://user:hunter2-ftp@models.internal/v1", "must be an http:// or https:// URL"),
        ("http:///v1", "has no host"),
    ],
)
def test_a_bad_base_url_is_one_line_naming_the_setting(
    cli, monkeypatch: pytest.MonkeyPatch, value: str, says: str
) -> None:
    monkeypatch.setenv("PLAYBOOK_MODEL_BASE_URL", value)

    result = cli("doctor")

    assert result.exit_code == 2
    assert "Traceback" not in result.output
    [line] = [line for line in result.output.splitlines() if line.strip()]
    assert "PLAYBOOK_MODEL_BASE_URL" in line and says in line
    assert "hunter2-ftp" not in result.output

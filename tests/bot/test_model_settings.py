"""The model endpoint's settings: off by default, bounded, and the key kept out of every text."""

from __future__ import annotations

import logging

import pytest
from pydantic import ValidationError

from bot.cli.base import invalid_settings
from bot.config import Settings
from bot.logs import configure_logging
from tests.fakes.model import FakeModel

KEY = "sk-settings-model-key-0123456789"


def settings(**values: str) -> Settings:
    return Settings(_env_file=None, **values)


def test_the_model_is_off_until_both_url_and_model_are_set() -> None:
    assert not settings().model_enabled
    assert not settings(PLAYBOOK_MODEL_BASE_URL="http://localhost:11434/v1").model_enabled
    assert not settings(PLAYBOOK_MODEL="llama3.1:8b").model_enabled
    # An empty line in a .env file is no model, not a model named "".
    assert not settings(PLAYBOOK_MODEL_BASE_URL=" ", PLAYBOOK_MODEL="").model_enabled
    on = settings(PLAYBOOK_MODEL_BASE_URL="http://localhost:11434/v1", PLAYBOOK_MODEL="llama3.1:8b")
    assert on.model_enabled
    assert (on.model_timeout_seconds, on.model_daily_calls, on.model_daily_tokens) == (
        60,
        500,
        1_000_000,
    )
    assert on.model_send_diffs is False
    assert on.model_key is None


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("PLAYBOOK_MODEL_TIMEOUT_SECONDS", "0"),
        ("PLAYBOOK_MODEL_TIMEOUT_SECONDS", "601"),
        ("PLAYBOOK_MODEL_DAILY_CALLS", "-1"),
        ("PLAYBOOK_MODEL_DAILY_TOKENS", "lots"),
        ("PLAYBOOK_MODEL_SEND_DIFFS", "maybe"),
    ],
)
def test_a_value_out_of_bounds_is_an_error_naming_its_setting(name: str, value: str) -> None:
    with pytest.raises(ValidationError) as raised:
        settings(**{name: value})
    message = invalid_settings(raised.value)
    assert message.startswith(f"invalid setting ({name}: ")
    assert "\n" not in message


def test_zero_budgets_are_allowed_and_mean_none() -> None:
    none = settings(PLAYBOOK_MODEL_DAILY_CALLS="0", PLAYBOOK_MODEL_DAILY_TOKENS="0")
    assert (none.model_daily_calls, none.model_daily_tokens) == (0, 0)


def test_the_key_and_the_urls_credentials_are_scrubbed_from_logs_and_never_shown(
    capsys: pytest.CaptureFixture[str],
) -> None:
    url = "https://proxy-user:hunter2-proxy@models.example.com/v1?token=qs-secret-42"
    configured = settings(
        PLAYBOOK_MODEL_BASE_URL=url, PLAYBOOK_MODEL="gpt-4o-mini", PLAYBOOK_MODEL_API_KEY=KEY
    )
    assert configured.model_key == KEY
    for shown in (repr(configured), str(configured), str(configured.model_dump())):
        assert KEY not in shown
    assert configured.model_endpoint == "https://models.example.com/v1"

    # What `serve` and every command do at start: the settings' secrets are scrubbed from logs.
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    configure_logging("INFO", "text", configured.secret_values())
    try:
        logging.getLogger("bot.test").error("calling %s with %s", url, KEY)
    finally:
        root.handlers[:], root.level = handlers, level
    logged = capsys.readouterr().err
    assert "calling" in logged
    for secret in (KEY, "hunter2-proxy", "qs-secret-42"):
        assert secret not in logged


@pytest.mark.parametrize(
    "model",
    [
        {},
        {"PLAYBOOK_MODEL_BASE_URL": "http://localhost:11434/v1"},
        {"PLAYBOOK_MODEL": "llama3.1:8b"},
        {"PLAYBOOK_MODEL_BASE_URL": " ", "PLAYBOOK_MODEL": "llama3.1:8b"},
    ],
)
def test_capture_from_reviews_model_without_a_model_is_refused_at_startup(
    cli, monkeypatch: pytest.MonkeyPatch, model: dict[str, str]
) -> None:
    for name in ("PLAYBOOK_MODEL_BASE_URL", "PLAYBOOK_MODEL"):
        monkeypatch.delenv(name, raising=False)
    for name, value in {"PLAYBOOK_CAPTURE_FROM_REVIEWS": "model", **model}.items():
        monkeypatch.setenv(name, value)

    with pytest.raises(ValidationError) as raised:
        Settings(_env_file=None)
    assert invalid_settings(raised.value) == (
        "invalid setting (PLAYBOOK_CAPTURE_FROM_REVIEWS=model needs a model endpoint: set "
        "PLAYBOOK_MODEL_BASE_URL and PLAYBOOK_MODEL, or use 'heuristic')"
    )
    # Every command starts by reading the settings: doctor says the same one line and stops.
    result = cli("doctor")
    assert result.exit_code == 2
    assert result.stdout == ""
    assert result.stderr == f"error: {invalid_settings(raised.value)}\n"


def test_capture_from_reviews_model_with_a_model_is_accepted(
    cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = FakeModel(api_key=None)
    model.start()
    try:
        monkeypatch.setenv("PLAYBOOK_CAPTURE_FROM_REVIEWS", "model")
        monkeypatch.setenv("PLAYBOOK_MODEL_BASE_URL", model.base_url)
        monkeypatch.setenv("PLAYBOOK_MODEL", "test-model")
        assert Settings(_env_file=None).capture_from_reviews == "model"

        result = cli("doctor")
    finally:
        model.stop()
    assert result.exit_code == 0, result.output
    assert "invalid setting" not in result.output
    [line] = [line for line in result.stdout.splitlines() if "] model: " in line]
    assert line.startswith(f"[ok  ] model: test-model at {model.base_url} answers JSON")

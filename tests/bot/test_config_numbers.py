"""The environment's numeric settings never read a boolean word as a number (`true` is not 1)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from bot.config import Settings

# Every setting whose type is a number (or an optional one), by its environment variable.
NUMERIC = sorted(
    str(field.validation_alias)
    for field in Settings.model_fields.values()
    if field.annotation in (int, float, int | None, float | None)
    and isinstance(field.validation_alias, str)
)


def test_the_numeric_settings_are_found() -> None:
    assert "PLAYBOOK_HOLDOUT_PERCENT" in NUMERIC and "PLAYBOOK_LESSONS_PER_TICKET" in NUMERIC


@pytest.mark.parametrize("word", ["true", "false", "yes", "on", "0x10"])
@pytest.mark.parametrize("name", NUMERIC)
def test_a_boolean_word_for_a_number_is_refused_naming_the_variable(
    monkeypatch: pytest.MonkeyPatch, name: str, word: str
) -> None:
    monkeypatch.setenv(name, word)
    with pytest.raises(ValidationError, match=name):
        Settings(_env_file=None)  # type: ignore[call-arg]

"""Where proposals from review feedback come from: the setting's values and their parsing.

Kept apart from the proposal rules so that reading the settings loads nothing of them.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Any

from pydantic import BeforeValidator


class CaptureFrom(StrEnum):
    """Where proposals from review feedback come from (PLAYBOOK_CAPTURE_FROM_REVIEWS)."""

    OFF = "off"
    HEURISTIC = "heuristic"
    MODEL = "model"  # one reflection call per PR, as a job; the heuristic when no model is set


def _capture_value(value: Any) -> Any:
    """YAML reads a bare `off` as false (and `on` as true); a value is compared without case."""
    if isinstance(value, bool):  # `off`/`no` and `on`/`yes` in YAML
        return (CaptureFrom.HEURISTIC if value else CaptureFrom.OFF).value
    if isinstance(value, str):
        value = value.strip().lower()
    return value


# The type of the setting, in the environment and in a repository's settings file alike.
CaptureSetting = Annotated[CaptureFrom, BeforeValidator(_capture_value)]

"""A handler that lost a status race is retried, not left dead: read again, it decides afresh."""

from __future__ import annotations

from bot.outcomes import classify
from playbook.errors import Conflict, InvalidTransition


def test_a_lost_race_is_transient_and_a_wrong_status_is_not() -> None:
    assert classify(Conflict("pb-1 changed while this request ran")).kind == "transient"
    assert classify(InvalidTransition("pb-1 is archived")).kind == "permanent"

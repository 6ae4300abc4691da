"""Handlers see a delivery without NUL (U+0000): PostgreSQL refuses it in any text column."""

from __future__ import annotations

import json
from types import SimpleNamespace

from bot.handlers.router import Event

NUL = "\x00"


def _row(payload: object) -> SimpleNamespace:
    return SimpleNamespace(
        source="github",
        event="issues",
        action="opened",
        payload=json.dumps(payload),
        delivery_id="d-1",
        installation_id=None,
    )


def test_every_string_and_key_of_the_payload_loses_its_nul() -> None:
    payload = {
        "issue": {"title": f"a{NUL}b", "labels": [{"name": NUL}, f"x{NUL}", [[f"{NUL}deep"]]]},
        f"key{NUL}": 1,
        "n": 7,
        "flag": True,
        "none": None,
    }
    event = Event.from_row(_row(payload))
    assert NUL not in json.dumps(event.payload, ensure_ascii=False)
    assert event.payload == {
        "issue": {"title": "ab", "labels": [{"name": ""}, "x", [["deep"]]]},
        "key": 1,
        "n": 7,
        "flag": True,
        "none": None,
    }


def test_a_payload_nested_as_deep_as_the_receiver_allows_is_cleaned_without_recursion() -> None:
    payload: dict = {"v": NUL}
    for _ in range(99):
        payload = {"a": [payload]}
    event = Event.from_row(_row(payload))
    assert NUL not in json.dumps(event.payload)


def test_text_that_only_looks_like_an_escape_is_left_as_it_is() -> None:
    # A backslash and "u0000" written by a person: six characters, no NUL.
    event = Event.from_row(_row({"body": "\\u0000 is how JSON writes NUL"}))
    assert event.payload["body"] == "\\u0000 is how JSON writes NUL"

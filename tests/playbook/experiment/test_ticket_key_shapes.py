"""A ticket key of any shape is canonicalised in linear time, as the old pattern spelled it."""

from __future__ import annotations

import pytest

from playbook.experiment.assignment import canonical
from tests.support import hang_guard


@pytest.mark.parametrize(
    ("key", "expected"),
    [
        ("Acme/API#007", "acme/api#7"),
        ("a/b/c#1", "a/b/c#1"),
        ("/a#1", "/A#1"),  # nothing before the only "/": not a GitHub key
        ("a/#1", "A/#1"),
        ("a/b#", "A/B#"),
        ("a/b#1x", "A/B#1X"),
        ("a b/c#1", "A B/C#1"),
        ("a/b#\u0663", "A/B#\u0663"),  # an Arabic-Indic digit is no issue number
        ("ctms-12", "CTMS-12"),
    ],
)
def test_the_shapes_of_a_key(key: str, expected: str) -> None:
    assert canonical(key) == expected


def test_a_long_key_of_slashes_without_a_number_is_no_hang() -> None:
    with hang_guard(30, "canonicalising 400,000 characters of slashes"):
        assert canonical("a/" * 200_000) == "A/" * 200_000

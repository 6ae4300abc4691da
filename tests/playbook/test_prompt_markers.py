"""The markers around untrusted text in the model's prompts are defused in linear time: a PR
body of spaces after a "<" costs a pass, not a pass per space."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from playbook.consolidation import prompt as consolidation_prompt
from playbook.ratings import prompt as ratings_prompt
from playbook.reviews import reflection
from tests.support import hang_guard

QUOTERS: list[tuple[str, Callable[[str], str]]] = [
    ("lessons", consolidation_prompt._quoted),
    ("work", ratings_prompt._quoted),
    ("feedback", reflection._quoted),
]


@pytest.mark.parametrize(("marker", "quoted"), QUOTERS, ids=[m for m, _ in QUOTERS])
def test_markers_are_defused_in_any_spacing(marker: str, quoted: Callable[[str], str]) -> None:
    text = f"a <{marker}> b < / {marker.upper()} > c <\t{marker}\n>"
    assert quoted(text) == f"a ({marker}) b (/{marker}) c ({marker})"


@pytest.mark.parametrize(("marker", "quoted"), QUOTERS, ids=[m for m, _ in QUOTERS])
def test_runs_of_spaces_after_a_bracket_are_no_hang(
    marker: str, quoted: Callable[[str], str]
) -> None:
    # Was quadratic: 8,000 spaces took 0.25 s, so 200,000 would take minutes.
    for text in ("<" + " " * 200_000 + "x", ("<" + " " * 60 + "/" + " " * 60) * 2_000):
        with hang_guard(60, f"defusing {len(text):,} characters of <{marker}> look-alikes"):
            assert quoted(text) == text

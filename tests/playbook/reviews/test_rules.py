"""Rules in review feedback: what counts as one, the proposal's text, quotes, measured floors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from playbook import reviews
from playbook.reviews import Rule, cue_of, quote_found, rules_in

DATA = Path(__file__).resolve().parents[2] / "data" / "review_sentences.jsonl"
# Floors a little under what bench/review_rules.py measures (README "Learning from reviews"):
# a change to the extractor that loses rules or adds false alarms fails here. `fresh` items were
# written after the extractor was frozen, so they are the honest measure; `all` includes the
# items it was tuned on.
FLOORS = {"all": (0.95, 0.90), "fresh": (0.90, 0.85)}


def _labelled() -> list[dict]:
    return [json.loads(line) for line in DATA.read_text().splitlines() if line.strip()]


def _precision_recall(rows: list[dict]) -> tuple[float, float]:
    hits = false_alarms = misses = 0
    for row in rows:
        found = bool(rules_in(row["text"]))
        hits += found and row["rule"]
        false_alarms += found and not row["rule"]
        misses += not found and row["rule"]
    return hits / (hits + false_alarms), hits / (hits + misses)


def test_public_surface_is_pinned() -> None:
    assert sorted(reviews.__all__) == ["Rule", "cue_of", "quote_found", "rules_in"]


def test_labelled_set_is_large_varied_and_balanced() -> None:
    rows = _labelled()
    assert len(rows) >= 200
    assert {row["set"] for row in rows} == {"dev", "holdout", "fresh"}
    assert all(set(row) == {"text", "rule", "style", "set"} for row in rows)
    share = sum(row["rule"] for row in rows) / len(rows)
    assert 0.4 <= share <= 0.6
    styles = {row["style"] for row in rows}
    assert {"terse", "polite", "question", "suggestion", "quoted-code", "nit", "approval"} <= styles
    assert len({row["text"] for row in rows}) == len(rows)  # no item counted twice


@pytest.mark.parametrize("group", sorted(FLOORS))
def test_precision_and_recall_stay_above_the_floors(group: str) -> None:
    rows = [row for row in _labelled() if group == "all" or row["set"] == group]
    precision, recall = _precision_recall(rows)
    floor_precision, floor_recall = FLOORS[group]
    assert precision >= floor_precision, f"{group} precision {precision:.3f}"
    assert recall >= floor_recall, f"{group} recall {recall:.3f}"


@pytest.mark.parametrize(
    "sentence",
    [
        "Don't log the token.",
        "Never catch bare `Exception` here.",
        "We always use UTC-aware datetimes.",
        "Prefer `httpx` over `requests` for new code.",
        "Please make sure every endpoint checks the org permission.",
        "Migrations must be reversible.",
        "Use the v2 client here, v1 drops retries.",
        "Tabs, not spaces, in the Makefile.",
        "Shouldn't this use the connection pool?",
        "Could you use `tmp_path` instead of `/tmp`?",
        "Why not use `functools.cache` here?",
        "nit: constants should be UPPER_CASE.",
    ],
)
def test_rules(sentence: str) -> None:
    assert cue_of(sentence)


@pytest.mark.parametrize(
    "sentence",
    [
        "LGTM",
        "Thanks for picking this up!",
        "Should we cache this?",
        "Why is this change needed?",
        "Could you explain what this regex is matching?",
        "Can you add me as a reviewer on the follow-up?",
        "This always returns `True` because of the `or`.",
        "I've never seen this error before.",
        "Never mind, it's handled in the caller.",
        "Don't worry about the CI failure, it's flaky.",
        "I don't think so.",
        "This should be fine.",
        "You must have rebased, the diff is smaller.",
        "Rename this to `retry_count`.",
        "Please rebase on main.",
        "Fair enough, let's keep it as is.",
    ],
)
def test_not_rules(sentence: str) -> None:
    assert cue_of(sentence) is None


def test_politeness_and_nits_do_not_hide_a_rule_and_are_dropped_from_the_text() -> None:
    feedback = (
        "Thanks, looks good! Nit (non-blocking): please use `enumerate` instead of "
        "`range(len(...))`. I think we should stop using `assert` for validation."
    )
    assert rules_in(feedback) == [
        Rule(
            text="Use `enumerate` instead of `range(len(...))`.",
            quote="Nit (non-blocking): please use `enumerate` instead of `range(len(...))`.",
            cue="instead",
        ),
        Rule(
            text="We should stop using `assert` for validation.",
            quote="I think we should stop using `assert` for validation.",
            cue="should",
        ),
    ]


def test_openers_are_dropped_from_the_text_but_kept_in_the_quote() -> None:
    (rule,) = rules_in("Requesting changes: secrets must come from the environment.")
    assert rule.text == "Secrets must come from the environment."
    assert rule.quote == "Requesting changes: secrets must come from the environment."


def test_a_changes_requested_review_with_a_suggestion_block() -> None:
    review = (
        "```suggestion\n        timeout=10,\n```\n"
        "Every outbound call needs a timeout, otherwise a slow upstream hangs the worker."
    )
    (rule,) = rules_in(review)
    assert rule.text.startswith("Every outbound call needs a timeout")
    assert "timeout=10" not in rule.text


def test_quote_found_evens_out_markup_case_and_whitespace() -> None:
    feedback = (
        "@dana-k Please **don't** call `client.v1()` here,\nit drops retries. "
        "See [the guide](https://example.com/g)."
    )
    assert quote_found("don't call client.v1() here, it drops retries", feedback)
    assert quote_found("Please DON'T call `client.v1()`   here, it drops retries.", feedback)
    assert quote_found("please don\u2019t call client.v1() here", feedback)
    assert quote_found("see the guide", feedback)
    assert quote_found("the guide", feedback) is False  # too short to prove anything
    assert not quote_found("always call client.v1() here", feedback)
    assert not quote_found("https://example.com/g is the guide", feedback)
    assert not quote_found("don't call client.v1() here", None)


def test_quote_found_for_every_rule_of_the_labelled_set() -> None:
    for row in _labelled():
        for rule in rules_in(row["text"]):
            assert quote_found(rule.quote, row["text"]), rule

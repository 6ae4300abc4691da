"""Review feedback as the reviewer's own sentences: what is cleaned away, and hostile sizes."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from playbook.reviews import prose, rules_in
from playbook.reviews.rules import MAX_RULE_CHARS, MIN_RULE_CHARS


def test_block_quotes_are_not_the_reviewers_words() -> None:
    feedback = "> You should always use the pool\n\nYes, and this PR does."
    assert prose.sentences_in(feedback) == ["Yes, and this PR does."]
    assert rules_in(feedback) == []


def test_fenced_code_and_suggestion_blocks_are_dropped() -> None:
    feedback = (
        "```suggestion\n# never do this\nreturn total\n```\n"
        "```python\nassert always_retry()\n```\n"
        "    # indented: don't\n\n"
        "Every outbound call needs a timeout."
    )
    assert prose.sentences_in(feedback) == ["Every outbound call needs a timeout."]
    assert [rule.text for rule in rules_in(feedback)] == ["Every outbound call needs a timeout."]


def test_inline_code_keeps_its_text_and_is_no_cue() -> None:
    assert [rule.text for rule in rules_in("don't call `client.v1()` here, it drops retries")] == [
        "Don't call `client.v1()` here, it drops retries"
    ]
    # Cue words inside code are identifiers, not advice.
    assert rules_in("Renamed `never_retry` to `always_retry_once`.") == []


def test_mentions_cc_and_urls_are_dropped_link_text_kept() -> None:
    feedback = (
        "cc @infra-team: please follow the [error guide](https://example.com/errors) "
        "and see https://example.com/x for why we never return HTML from the API."
    )
    (sentence,) = prose.sentences_in(feedback)
    assert "@" not in sentence and "https://" not in sentence and "example.com" not in sentence
    assert "error guide" in sentence
    assert prose.sentences_in("<https://example.com/only-a-link>") == []
    assert prose.sentences_in("@maria-l can you look?") == ["can you look?"]
    assert prose.sentences_in("/cc @ops-oncall") == []


def test_html_comments_and_struck_words_are_dropped() -> None:
    feedback = "<!-- never shown: always do X -->\nLooks fine. Use ~~`requests`~~ `httpx` here."
    assert prose.sentences_in(feedback) == ["Looks fine.", "Use `httpx` here."]
    # An unterminated comment hides the rest, as GitHub shows it.
    assert prose.sentences_in("Fine.\n<!-- Never log tokens.") == ["Fine."]


def test_sentences_split_on_closers_not_on_file_names_or_abbreviations() -> None:
    feedback = "Use `config.py`, e.g. the loader. Never log tokens! Why?\nKeep it."
    assert prose.sentences_in(feedback) == [
        "Use `config.py`, e.g. the loader.",
        "Never log tokens!",
        "Why?",
        "Keep it.",
    ]
    # A hard-wrapped sentence goes on in lower case: one sentence, not two.
    assert prose.sentences_in("Please don't call the v1 client\nhere, it drops retries.") == [
        "Please don't call the v1 client here, it drops retries."
    ]


def test_list_items_are_sentences_of_their_own() -> None:
    feedback = "A few things:\n\n- use `snake_case` for keys\n- never return the internal id"
    assert [rule.text for rule in rules_in(feedback)] == [
        "Use `snake_case` for keys",
        "Never return the internal id",
    ]


def test_length_bounds() -> None:
    assert rules_in("Never do X.") == []  # under MIN_RULE_CHARS
    long_rule = "Never " + "really " * 60 + "log the token."
    assert len(long_rule) > MAX_RULE_CHARS
    assert rules_in(long_rule) == []  # a wall of text is no lesson; it is not clipped either
    assert [r.text for r in rules_in("Never log tokens.")] == ["Never log tokens."]


def test_feedback_beyond_the_cap_is_not_read() -> None:
    head = "x" * (prose.FEEDBACK_CHARS - 10) + "\n\n"
    assert rules_in(head + "Never log the raw token anywhere.") == []
    assert rules_in(None) == [] and rules_in("") == []


@pytest.mark.slow
def test_hostile_inputs_at_the_cap_come_back_with_bounded_rules() -> None:
    hostile = [
        "[" * prose.FEEDBACK_CHARS,
        "![" * (prose.FEEDBACK_CHARS // 2),
        "." * prose.FEEDBACK_CHARS,
        "> " * (prose.FEEDBACK_CHARS // 2),
        "<!--" * (prose.FEEDBACK_CHARS // 4),
        "`a" * (prose.FEEDBACK_CHARS // 2),
        "  - " * (prose.FEEDBACK_CHARS // 4),
        "Always do the thing. " * 10_000,
    ]
    for text in hostile:
        for rule in rules_in(text):
            assert MIN_RULE_CHARS <= len(rule.text) <= MAX_RULE_CHARS
    # The same sentence given many times is one rule.
    assert len(rules_in("Always do the thing. " * 10_000)) == 1


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=400))
def test_any_text_gives_bounded_rules_quoting_the_feedback(text: str) -> None:
    from playbook.reviews import quote_found

    for rule in rules_in(text):
        assert MIN_RULE_CHARS <= len(rule.text) <= MAX_RULE_CHARS
        assert "\n" not in rule.text
        assert rule.cue
        assert len(rule.quote) < MIN_RULE_CHARS or quote_found(rule.quote, text)

"""Groups of overlapping lessons: paraphrases meet, boilerplate alone does not; key terms."""

from __future__ import annotations

import random
from typing import Any

import pytest

from playbook.consolidation import groups as groups_module
from playbook.consolidation.groups import common_terms, find_groups, similarities
from playbook.consolidation.terms import dropped_terms, key_terms
from tests.support import hang_guard

SUFFIX = " Always make sure the tests pass before you open the pull request, and update the docs."
# Three wordings of one instruction, learned from three tickets.
RETRY = [
    "Retry webhook deliveries with an idempotency key so a replay is not applied twice (CTMS-12)",
    "When a webhook delivery is replayed, retry it with the same idempotency key (OPS-77)",
    "Use an idempotency key on every webhook delivery retry; a replay must not apply twice",
]
# Two wordings of another one.
LOCK = [
    "Never hold a database lock across an HTTP call to the payment provider",
    "Do not keep the database lock while calling the payment provider over HTTP",
]
# Distinct instructions that share only the team's boilerplate sentence.
DISTINCT = [
    "Pin chromium in CI for the screenshot tests." + SUFFIX,
    "Vendor the chart library for the stats page." + SUFFIX,
    "Rotate the signing key every ninety days." + SUFFIX,
    "Cache the search index between requests." + SUFFIX,
    "Run schema migrations before deploying the worker." + SUFFIX,
]


def lessons() -> list[tuple[str, str]]:
    texts = [*DISTINCT[:2], RETRY[0], *DISTINCT[2:4], RETRY[1], LOCK[0], DISTINCT[4], RETRY[2]]
    texts.append(LOCK[1])
    return [(f"pb-{n}", text) for n, text in enumerate(texts, start=1)]


def test_paraphrases_are_grouped_and_boilerplate_sharers_are_not() -> None:
    groups = find_groups(lessons())
    # Most similar first.
    assert [g.member_ids for g in groups] == [("pb-3", "pb-6", "pb-9"), ("pb-7", "pb-10")]
    assert all(0.5 <= g.similarity <= 1.0 for g in groups)
    grouped = {bullet_id for g in groups for bullet_id in g.member_ids}
    assert not grouped & {"pb-1", "pb-2", "pb-4", "pb-5", "pb-8"}


def test_boilerplate_weighs_little_because_most_lessons_of_the_scope_share_it() -> None:
    texts = [text for _, text in lessons()]
    matrix = similarities(texts)
    # The distinct lessons are most of their text alike, yet far below any paraphrase pair.
    assert matrix[0, 1] < 0.4
    assert matrix[2, 5] > 0.5
    assert {"alway", "test", "pull", "request"} <= common_terms(texts, share=0.4)


def test_the_same_lessons_in_another_order_give_the_same_groups_with_ids_in_id_order() -> None:
    shuffled = lessons()
    random.Random(3).shuffle(shuffled)
    renamed = [(f"pb-{100 - int(i[3:])}", t) for i, t in lessons()]
    assert find_groups(shuffled) == find_groups(lessons())
    assert {g.member_ids for g in find_groups(renamed)} == {
        ("pb-91", "pb-94", "pb-97"),
        ("pb-90", "pb-93"),
    }


def test_groups_are_cohesive_not_chains_and_never_larger_than_max_size() -> None:
    # Each text shares three of its four words with the next: chained (single-link), all ten
    # would be one group though members four apart share no word.
    words = "alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike"
    words = words.split()
    chain = [(f"pb-{i + 1}", " ".join(words[i : i + 4])) for i in range(len(words) - 3)]
    for group in find_groups(chain, threshold=0.4):
        first, last = int(group.member_ids[0][3:]), int(group.member_ids[-1][3:])
        assert last - first <= 3
    copies = [(f"pb-{i}", "Retry the upload with an idempotency key") for i in range(1, 13)]
    assert [len(g.member_ids) for g in find_groups(copies, max_size=5)] == [5, 5, 2]


def test_no_groups_from_too_few_lessons_or_from_empty_texts() -> None:
    assert find_groups([("pb-1", "Retry the upload")]) == []
    assert find_groups([("pb-1", "the of and"), ("pb-2", "the of and")]) == []


def test_two_thousand_lessons_are_compared_in_full_only_within_their_groups(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    chooser = random.Random(7)
    vocabulary = [f"word{n}" for n in range(3000)]
    texts = [" ".join(chooser.sample(vocabulary, 12)) + SUFFIX for _ in range(1990)]
    texts += [RETRY[0], RETRY[1], RETRY[2], *LOCK, *DISTINCT]
    # The dense pairwise work (average-link) is done per set of lessons joined by a pair at the
    # threshold, so its size is that of the groups, not of the playbook: 2 + 3 here, not 2,000².
    blocks: list[int] = []
    average_link = groups_module._average_link

    def counted(similar: Any, *args: Any) -> Any:
        blocks.append(similar.shape[0])
        return average_link(similar, *args)

    monkeypatch.setattr(groups_module, "_average_link", counted)
    # A hang guard only: this takes about a second; bench/consolidation_groups.py times it.
    with hang_guard(60, "grouping 2,000 lessons"):
        groups = find_groups([(f"pb-{n}", t) for n, t in enumerate(texts, start=1)])
    assert [g.member_ids for g in groups] == [
        ("pb-1991", "pb-1992", "pb-1993"),
        ("pb-1994", "pb-1995"),
    ]
    assert sorted(blocks) == [2, 3]


def test_key_terms_are_the_words_as_written_without_stop_words_ids_and_boilerplate() -> None:
    text = "Retry the upload with an idempotency key (CTMS-12, pb-3); always."
    assert key_terms(text) == ["retry", "upload", "idempotency", "key", "always"]
    assert key_terms(text, common={"alway"}) == ["retry", "upload", "idempotency", "key"]


def test_dropped_terms_name_each_members_words_the_draft_lacks() -> None:
    members = {
        "pb-10": "Retrying the upload needs an idempotency key; log the key",
        "pb-3": "Retry uploads with an idempotency key",
    }
    draft = "Retry the upload with an idempotency key."
    assert dropped_terms(members, draft) == {"pb-10": ["needs", "log"]}
    assert dropped_terms(members, draft + " It needs logging.") == {}

"""The BM25 index: scores equal rank_bm25's (Lucene idf) on real tickets; top-k, scopes, bytes."""

from __future__ import annotations

import gzip
import json
import math
import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rank_bm25 import BM25Okapi

from playbook.search import ranking
from playbook.search.index import BM25Index
from playbook.search.text import tokenize
from tests.support import DATA

# 600 real Apache Jira bug reports (key, summary, description[:500]; Apache License 2.0, from
# issues.apache.org via the SPEAR-SE study): real vocabulary, stack traces and long tails,
# which a handful of made-up sentences would not exercise.
DATASET = DATA / "apache-jira-600.jsonl.gz"


def corpus() -> list[list[str]]:
    # No fallback: a missing file must fail the parity test, not shrink it to a toy corpus.
    assert DATASET.exists(), f"{DATASET} is missing; it ships with the tests"
    with gzip.open(DATASET, "rt") as lines:
        rows = [json.loads(line) for line in lines]
    assert len(rows) == 600
    return [tokenize(r["summary"] + " " + (r["description"] or "")[:500]) for r in rows]


class LuceneBM25(BM25Okapi):
    """rank_bm25's BM25Okapi with Lucene's idf, the one difference from our index."""

    def _calc_idf(self, nd: dict[str, int]) -> None:
        for word, freq in nd.items():
            self.idf[word] = math.log(1 + (self.corpus_size - freq + 0.5) / (freq + 0.5))


@pytest.mark.parametrize("fill", ["add", "bulk", "bytes"])
def test_index_scores_equal_rank_bm25_also_after_adds_and_removes(fill: str) -> None:
    docs = corpus()
    index = BM25Index()
    if fill == "add":
        for i, tokens in enumerate(docs):
            index.add(f"d{i}", tokens)
    else:
        half = len(docs) // 2  # half in bulk, half one by one, then bulk again over both
        index.bulk((f"d{i}", tokens, "global", 0.0) for i, tokens in enumerate(docs[:half]))
        for i in range(half, len(docs) - 10):
            index.add(f"d{i}", docs[i])
            if i % 50 == 0:  # searches fold what was added into the postings they read
                index.search(docs[i][:5])
        index.bulk((f"d{i}", docs[i], "global", 0.0) for i in range(len(docs) - 10, len(docs)))
        if fill == "bytes":
            index = BM25Index.from_bytes(index.to_bytes())
    rng = random.Random(7)
    removed = set(rng.sample(range(len(docs)), len(docs) // 5))
    for i in removed:
        index.remove(f"d{i}")
    index.replace("d1", docs[2])  # an edit
    live = {f"d{i}": docs[i] for i in range(len(docs)) if i not in removed}
    live["d1"] = docs[2]
    ids = list(live)
    if fill == "bytes":
        index = BM25Index.from_bytes(index.to_bytes())
    reference = LuceneBM25([live[i] for i in ids])
    for _ in range(25):
        query = [*rng.choice(docs)[:40], "nosuchword"]
        expected = reference.get_scores(query)
        got = index.scores(query)
        for position, doc_id in enumerate(ids):
            assert got.get(doc_id, 0.0) == pytest.approx(expected[position], abs=1e-6)


def test_index_top_k_and_scopes() -> None:
    index = BM25Index()
    index.add("a", tokenize("broker restart journal"), scope="AMQ")
    index.add("b", tokenize("broker restart"), scope="global")
    index.add("c", tokenize("broker restart journal corrupted"), scope="ZK")
    index.add("d", tokenize("unrelated words"), scope="AMQ")
    for n in range(10):  # in a four-document corpus every shared word has idf <= 0
        index.add(f"filler{n}", [f"filler{n}", "padding"], scope="AMQ")
    ranked = index.search(tokenize("broker journal"), k=5, scopes={"AMQ", "global"})
    assert [doc for doc, _ in ranked] == ["a", "b"]
    assert ranked[0][1] > ranked[1][1] > 0
    assert index.search(tokenize("broker"), k=1) != []
    assert index.search(["nothing"], k=3) == []


def test_index_ranks_by_weighted_score_and_keeps_stamps_through_compaction() -> None:
    index = BM25Index()
    index.add("strong-old", tokenize("broker journal"), stamp=0.0)
    index.add("weak-new", tokenize("broker journal corrupted on restart"), stamp=100.0)
    for n in range(1500):  # enough removals to compact the index
        index.add(f"filler{n}", [f"filler{n}", "padding"], stamp=50.0)
    for n in range(1200):
        index.remove(f"filler{n}")

    def weigh(scores, stamps):  # an old stamp keeps a third of its score
        return ranking.weighted(scores, np.where(stamps < 100.0, 1 / 3, 1.0))

    by_score = index.ranked(tokenize("broker journal"), k=2)
    assert [doc for doc, _, _ in by_score] == ["strong-old", "weak-new"]
    weighted = index.ranked(tokenize("broker journal"), k=2, weigh=weigh)
    assert [doc for doc, _, _ in weighted] == ["weak-new", "strong-old"]
    old_score = by_score[0][1]
    assert weighted[1][1:] == pytest.approx((old_score, old_score / 3))


def test_a_term_in_every_lesson_still_scores_above_zero() -> None:
    # Okapi's idf is 0 for a term in half the documents and below zero past that, so in a small
    # playbook a lesson sharing a word with the ticket scored 0 or less, tied with no match.
    index = BM25Index()
    index.add("purge", tokenize("Purge the CDN cache before deploying static assets"))
    index.add("other", tokenize("Rotate the database credentials every quarter"))
    ranked = index.search(tokenize("CDN purge"), k=5)
    assert [doc for doc, _ in ranked] == ["purge"]
    assert ranked[0][1] > 0
    index.add("both", tokenize("Rotate and purge the logs"))
    index.add("again", tokenize("Purge queues nightly"))
    scores = dict(index.search(tokenize("purge"), k=5))
    assert set(scores) == {"purge", "both", "again"}  # in three of four lessons: still > 0
    assert min(scores.values()) > 0
    [rotate], [purge] = tokenize("rotate"), tokenize("purge")
    assert index.idf(rotate) > index.idf(purge) > 0


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.lists(st.sampled_from("abcdefgh"), min_size=1, max_size=6), min_size=1, max_size=12
    ),
    st.lists(st.sampled_from("abcdefghxyz"), min_size=1, max_size=4),
)
def test_every_lesson_sharing_a_term_ranks_above_every_lesson_sharing_none(
    docs: list[list[str]], query: list[str]
) -> None:
    index = BM25Index()
    for i, tokens in enumerate(docs):
        index.add(f"d{i}", tokens)
    found = dict(index.search(query, k=len(docs)))
    sharing = {f"d{i}" for i, tokens in enumerate(docs) if set(tokens) & set(query)}
    assert set(found) == sharing
    assert all(score > 0 for score in found.values())


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.lists(st.sampled_from("abcdefgh"), min_size=1, max_size=6),
            st.sampled_from(["A", "B", "global"]),
            st.floats(0, 1000),
        ),
        min_size=1,
        max_size=40,
    ),
    st.lists(st.sampled_from("abcdefghxyz"), min_size=1, max_size=5),
    st.integers(1, 12),
    st.sets(st.sampled_from(["A", "B", "global", "other"]), min_size=1),
    st.booleans(),
)
def test_the_top_k_are_those_every_key_computed_would_give(
    docs: list[tuple[list[str], str, float]],
    query: list[str],
    k: int,
    scopes: set[str],
    weighed: bool,
) -> None:
    # `ranked` weighs only the documents that can still make the top k; computing every
    # touched document's key and sorting must give the same list, ties included.
    index = BM25Index()
    for i, (tokens, scope, stamp) in enumerate(docs):
        index.add(f"d{i:02}", tokens, scope=scope, stamp=stamp)

    def weigh(scores: np.ndarray, stamps: np.ndarray) -> np.ndarray:  # keys at most the scores
        return scores * (0.05 + 0.95 * stamps / 1000)

    scores = index.scores(query)
    keys = {
        f"d{i:02}": float(weigh(np.array([scores[f"d{i:02}"]]), np.array([stamp]))[0])
        if weighed
        else scores[f"d{i:02}"]
        for i, (_, scope, stamp) in enumerate(docs)
        if f"d{i:02}" in scores and scope in scopes
    }
    expected = sorted(keys, key=lambda doc: (-keys[doc], doc))[:k]
    ranked = index.ranked(query, k=k, scopes=scopes, weigh=weigh if weighed else None)
    assert [doc for doc, _, _ in ranked] == expected
    assert [key for _, _, key in ranked] == pytest.approx([keys[doc] for doc in expected])


def test_index_from_bytes_refuses_what_is_not_an_index() -> None:
    with pytest.raises(ValueError, match="index bytes"):
        BM25Index.from_bytes(b"not an index")

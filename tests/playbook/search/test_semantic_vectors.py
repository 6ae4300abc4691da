"""Lesson embeddings: stored with model and text hash, listed when stale, indexed per process."""

from __future__ import annotations

import numpy as np
import pytest
from sqlalchemy import Engine, select

from playbook.db import transaction
from playbook.errors import InvalidInput
from playbook.lessons import lifecycle
from playbook.models import Embedding
from playbook.search import retrieval, vectors
from playbook.search.rerank import QueryEmbedding, RerankConfig
from tests.playbook.search.test_retrieval import seed
from tests.playbook.search.test_semantic_rerank import LESSONS, MODEL, E, plant

AGENT = {"Authorization": "Bearer agent"}


def ours(stale: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """The stale lessons of the test, without the filler every seeded playbook has."""
    return [(i, text) for i, text in stale if i.startswith("pb-")]


def test_save_stores_float32_and_stamps_a_bumped_version(engine: Engine) -> None:
    seed(engine, *LESSONS)
    with transaction(engine) as session:
        before = vectors.embedding_version(session)
        vectors.save(session, "pb-1", model=MODEL, text_hash="h1", vector=[1.5, -2.0, 0.0, 3.25])
        vectors.save(session, "pb-1", model=MODEL, text_hash="h2", vector=[1.0, 0.0, 0.0, 0.0])
    with transaction(engine) as session:
        row = session.scalars(select(Embedding)).one()
        assert (row.model, row.text_hash, row.dim) == (MODEL, "h2", 4)
        assert np.frombuffer(row.vector, dtype="<f4").tolist() == [1.0, 0.0, 0.0, 0.0]
        assert row.version == vectors.embedding_version(session) == before + 2


@pytest.mark.parametrize("vector", [[], [1.0, float("nan")], [float("inf")]])
def test_save_refuses_a_vector_that_is_not_finite_numbers(engine: Engine, vector) -> None:
    seed(engine, *LESSONS)
    with transaction(engine) as session, pytest.raises(InvalidInput, match="vector"):
        vectors.save(session, "pb-1", model=MODEL, text_hash="h", vector=vector)


def test_stale_lists_missing_other_model_and_edited_lessons(engine: Engine) -> None:
    seed(engine, *LESSONS)
    plant(engine, pb_1=E[0], pb_2=E[1])
    with transaction(engine) as session:
        text = lifecycle.get(session, "pb-3").text
        vectors.save(session, "pb-3", model="other", text_hash=vectors.text_hash(text), vector=E[2])
        assert vectors.current(session, "pb-1", MODEL)
        assert not vectors.current(session, "pb-3", MODEL)
        assert not vectors.current(session, "pb-4", MODEL)  # none at all
        assert ours(vectors.stale(session, MODEL)) == [
            ("pb-3", LESSONS[2][0]),
            ("pb-4", LESSONS[3][0]),
        ]
        lifecycle.edit(session, "pb-1", actor="t", text="Payment webhook retries need a key")
        lifecycle.deprecate(session, "pb-4", reason="wrong", actor="t")
    with transaction(engine) as session:
        assert not vectors.current(session, "pb-1", MODEL)
        stale = ours(vectors.stale(session, MODEL))
        # The edited lesson with its new text; a deprecated one needs no embedding.
        assert stale == [("pb-1", "Payment webhook retries need a key"), ("pb-3", LESSONS[2][0])]
        assert len(vectors.stale(session, MODEL, limit=3)) == 3
        assert ours(vectors.stale(session, "other")) == [
            ("pb-1", "Payment webhook retries need a key"),
            ("pb-2", LESSONS[1][0]),
        ]


def test_an_index_reads_another_process_writes_incrementally(engine: Engine) -> None:
    seed(engine, *LESSONS)
    plant(engine, pb_1=E[0])
    mine, theirs = vectors.VectorIndex(), vectors.VectorIndex()  # as in two processes
    with transaction(engine) as session:
        mine.sync(session, MODEL)
        theirs.sync(session, MODEL)
        assert mine.top(E[1], 2, scopes={"CTMS"}) == [("pb-1", pytest.approx(0.0))]
    plant(engine, pb_2=E[1], pb_1=E[2])  # written by "their" worker
    with transaction(engine) as session:
        mine.sync(session, MODEL)
        assert [i for i, _ in mine.top(E[1], 1, scopes={"CTMS"})] == ["pb-2"]
        assert mine.cosines(E[2], ["pb-1", "pb-2", "pb-3"]) == {
            "pb-1": pytest.approx(1.0),
            "pb-2": pytest.approx(0.0),
        }
        lifecycle.deprecate(session, "pb-2", reason="wrong", actor="t")
    with transaction(engine) as session:
        theirs.sync(session, MODEL)
        # Deprecated since: found no more, by either.
        assert [i for i, _ in theirs.top(E[1], 3, scopes={"CTMS"})] == ["pb-1"]
        mine.sync(session, MODEL)
        assert mine.cosines(E[1], ["pb-2"]) == {}
    # Scopes and an allow-list narrow the search.
    plant(engine, pb_4=E[1])
    with transaction(engine) as session:
        mine.sync(session, MODEL)
        assert [i for i, _ in mine.top(E[1], 1, scopes={"OPS"})] == ["pb-4"]
        assert [i for i, _ in mine.top(E[1], 1, scopes={"CTMS"})] == ["pb-1"]
        assert [i for i, _ in mine.top(E[1], 3, {"pb-4"})] == ["pb-4"]
        assert [i for i, _ in mine.top(E[1], 3, lambda i: i != "pb-4")] == ["pb-1"]
        with pytest.raises(vectors.DimensionMismatch, match="5 dimensions"):
            mine.top(np.ones(5), 3)


def test_an_index_follows_a_restore_and_a_rollback(engine: Engine) -> None:
    seed(engine, *LESSONS)
    plant(engine, pb_3=E[2])
    index = vectors.VectorIndex()
    with transaction(engine) as session:
        lifecycle.deprecate(session, "pb-3", reason="wrong", actor="t")
    with transaction(engine) as session:
        index.sync(session, MODEL)
        assert index.top(E[2], 1) == []
        lifecycle.restore(session, "pb-3", actor="t")
    with transaction(engine) as session:
        index.sync(session, MODEL)
        assert [i for i, _ in index.top(E[2], 1)] == ["pb-3"]
    # A write this process saw that never committed is forgotten.
    with pytest.raises(RuntimeError), transaction(engine) as session:
        text = lifecycle.get(session, "pb-1").text
        vectors.save(session, "pb-1", model=MODEL, text_hash=vectors.text_hash(text), vector=E[2])
        index.sync(session, MODEL)
        assert len(index) == 2
        raise RuntimeError("the job failed after embedding")
    with transaction(engine) as session:
        index.sync(session, MODEL)
        assert [i for i, _ in index.top(E[2], 3)] == ["pb-3"]


def test_the_api_json_says_whether_the_rerank_was_used(api, engine: Engine) -> None:
    seed(engine, *LESSONS)
    plant(engine, pb_3=E[2])
    try:
        retrieval.query_embedder = lambda text: QueryEmbedding(E[2], MODEL)
        found = api.get("/api/v1/search?q=consumer+hangs+after+failover", headers=AGENT)
        answer = found.get_json()
        assert answer["rerank"] == "used" and answer["rerank_reason"] is None
        assert [(h["id"], h["text_rank"]) for h in answer["lessons"]] == [("pb-3", None)]
        assert answer["lessons"][0]["similarity"] == pytest.approx(1.0)
        retrieval.query_embedder = lambda text: QueryEmbedding(None, MODEL, "endpoint down")
        answer = api.get("/api/v1/search?q=webhook+retries", headers=AGENT).get_json()
        assert answer["rerank"] == "fallback" and answer["rerank_reason"] == "endpoint down"
        assert answer["lessons"][0]["similarity"] is None
    finally:
        retrieval.query_embedder = None
        retrieval.rerank_config = RerankConfig()
    answer = api.get("/api/v1/search?q=webhook+retries", headers=AGENT).get_json()
    assert answer["rerank"] == "off"


def test_past_its_size_an_approximate_graph_answers_and_keeps_in_step(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("usearch")
    monkeypatch.setattr(vectors, "APPROXIMATE_MIN", 1)
    seed(engine, *LESSONS)
    plant(engine, pb_1=E[0], pb_2=E[1])
    index = vectors.VectorIndex()
    with transaction(engine) as session:
        index.sync(session, MODEL)
        # The first search answers exactly while the graph is built in the background.
        assert [i for i, _ in index.top(E[1], 1)] == ["pb-2"]
    plant(engine, pb_3=E[2])  # written while it is built, or after: either way it is found
    assert index.approximate_ready.wait(60)
    with transaction(engine) as session:
        index.sync(session, MODEL)
        assert index._approximate is not None
        assert [i for i, _ in index.top(E[2], 1)] == ["pb-3"]
        assert index.top(E[0], 3, scopes={"CTMS"})[0][0] == "pb-1"
    plant(engine, pb_1=E[3])  # a vector replaced in the graph
    with transaction(engine) as session:
        index.sync(session, MODEL)
        assert [i for i, _ in index.top(E[3], 1)] == ["pb-1"]
        lifecycle.deprecate(session, "pb-1", reason="wrong", actor="t")
    with transaction(engine) as session:
        index.sync(session, MODEL)
        assert "pb-1" not in [i for i, _ in index.top(E[3], 3)]

"""The semantic rerank in search: planted vectors reorder, find wordless matches, or fall back."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import numpy as np
import pytest
from sqlalchemy import Engine

from playbook.db import transaction
from playbook.lessons import lifecycle
from playbook.search import retrieval, vectors
from playbook.search.rerank import QueryEmbedding, RerankConfig
from playbook.search.retrieval import Retriever
from playbook.search.text import Ticket
from tests.playbook.search.test_retrieval import seed

MODEL = "planted-4d"
E = np.eye(4, dtype=np.float32)  # four orthogonal directions: cosine 1 with itself, 0 otherwise
LESSONS = (
    ("Payment webhook retries must be idempotent", "CTMS"),  # pb-1
    ("Webhook retries deadlock on the orders row", "CTMS"),  # pb-2
    ("Reconnect the subscriber when the broker changes", "CTMS"),  # pb-3
    ("Webhook retries in another project", "OPS"),  # pb-4: another scope
)
WEBHOOK = "Webhook retries fail for payment"
FAILOVER = "The consumer hangs after failover"


@pytest.fixture
def embed_as() -> Iterator[Callable[[dict[str, np.ndarray | None]], list[str]]]:
    """Install a query embedder answering planted vectors per searched summary; reset after."""
    asked: list[str] = []

    def install(planted: dict[str, np.ndarray | None], reason: str | None = None) -> list[str]:
        def embedder(text: str) -> QueryEmbedding:
            asked.append(text)
            summary = text.partition("\n")[0]
            return QueryEmbedding(planted.get(summary), MODEL, reason)

        retrieval.query_embedder = embedder
        return asked

    yield install
    retrieval.query_embedder = None
    retrieval.rerank_config = RerankConfig()


def plant(engine: Engine, **by_id: np.ndarray) -> None:
    """Store each lesson's planted vector as the worker would, for its current text."""
    with transaction(engine) as session:
        for bullet_id, vector in by_id.items():
            text = lifecycle.get(session, bullet_id.replace("_", "-")).text
            vectors.save(
                session,
                bullet_id.replace("_", "-"),
                model=MODEL,
                text_hash=vectors.text_hash(text),
                vector=vector,
            )


def search(engine: Engine, text: str, **kwargs) -> retrieval.SearchResult:
    with transaction(engine) as session:
        return Retriever.shared(session).search(
            session, Ticket.from_text(text, scope="CTMS"), **kwargs
        )


def ids(result: retrieval.SearchResult) -> list[str]:
    return [hit.bullet_id for hit in result.hits]


def test_without_an_embedder_the_search_is_text_only_and_says_off(engine: Engine) -> None:
    seed(engine, *LESSONS)
    plant(engine, pb_1=E[0], pb_2=E[0], pb_3=E[0])
    result = search(engine, WEBHOOK)
    assert ids(result) == ["pb-1", "pb-2"]
    assert result.rerank == "off" and result.rerank_reason is None
    assert all(h.similarity is None and h.blended is None for h in result.hits)


def test_similarity_lifts_the_lesson_most_like_the_ticket(engine: Engine, embed_as) -> None:
    seed(engine, *LESSONS)
    text_order = ids(search(engine, WEBHOOK))
    assert text_order == ["pb-1", "pb-2"]
    # The text ranking's second lesson points where the ticket points; the first away.
    plant(engine, pb_1=E[1], pb_2=E[0], pb_3=E[2])
    asked = embed_as({"Webhook retries fail for payment": E[0]})
    result = search(engine, WEBHOOK)
    assert result.rerank == "used" and result.rerank_reason is None
    assert asked == [WEBHOOK]
    assert ids(result)[:2] == ["pb-2", "pb-1"]
    first, second = result.hits[:2]
    assert (first.text_rank, second.text_rank) == (2, 1)
    assert first.similarity == pytest.approx(1.0) and second.similarity == pytest.approx(0.0)
    assert first.blended > second.blended
    # A lesson of another scope never comes in, however like the ticket it is.
    assert "pb-4" not in ids(result)


def test_weight_zero_keeps_the_text_order(engine: Engine, embed_as) -> None:
    seed(engine, *LESSONS)
    plant(engine, pb_1=E[1], pb_2=E[0])
    embed_as({WEBHOOK: E[0]})
    retrieval.rerank_config = RerankConfig(weight=0.0)
    assert ids(search(engine, WEBHOOK))[:2] == ["pb-1", "pb-2"]


def test_a_lesson_sharing_no_word_is_found_by_similarity(engine: Engine, embed_as) -> None:
    seed(engine, *LESSONS)
    assert ids(search(engine, FAILOVER)) == []  # not one word in common
    plant(engine, pb_1=E[0], pb_2=E[1], pb_3=E[2])
    embed_as({FAILOVER: E[2] + 0.1 * E[0]})
    result = search(engine, FAILOVER, k=1)
    assert ids(result) == ["pb-3"]
    hit = result.hits[0]
    assert hit.text_rank is None and hit.similarity == pytest.approx(0.995, abs=1e-3)
    assert hit.bm25 == 0.0


def test_no_vector_from_the_endpoint_answers_with_the_text_ranking(
    engine: Engine, embed_as
) -> None:
    seed(engine, *LESSONS)
    plant(engine, pb_1=E[1], pb_2=E[0])
    text_only = search(engine, WEBHOOK)
    reason = "embedding endpoint timed out after 1.0 s; ranked by text"
    embed_as({}, reason)
    result = search(engine, WEBHOOK)
    assert result.rerank == "fallback" and result.rerank_reason == reason
    assert ids(result) == ids(text_only)
    assert [h.score for h in result.hits] == pytest.approx([h.score for h in text_only.hits])


def test_an_embedder_that_raises_falls_back_without_its_message(engine: Engine) -> None:
    seed(engine, *LESSONS)

    def broken(text: str) -> QueryEmbedding:
        raise RuntimeError("https://user:sk-secret@embeddings.example/v1 refused")

    retrieval.query_embedder = broken
    try:
        result = search(engine, WEBHOOK)
    finally:
        retrieval.query_embedder = None
    assert ids(result) == ["pb-1", "pb-2"] and result.rerank == "fallback"
    assert result.rerank_reason == "embedding failed (RuntimeError); ranked by text"


def test_a_vector_of_another_dimension_falls_back_with_the_reason(engine: Engine, embed_as) -> None:
    seed(engine, *LESSONS)
    plant(engine, pb_1=E[1], pb_2=E[0])
    embed_as({WEBHOOK: np.ones(3, dtype=np.float32)})
    result = search(engine, WEBHOOK)
    assert result.rerank == "fallback"
    assert "3 dimensions" in result.rerank_reason and "stored embeddings 4" in result.rerank_reason
    assert ids(result) == ["pb-1", "pb-2"]


@pytest.mark.parametrize(
    ("vector", "said"),
    [
        (np.zeros(4), "the query embedding is zero or not finite; ranked by text"),
        (np.array([1.0, np.nan, 0, 0]), "the query embedding is zero or not finite"),
        (np.array([]), "the query embedding has 0 dimensions, the stored embeddings 4"),
    ],
)
def test_an_empty_or_invalid_vector_falls_back(engine: Engine, embed_as, vector, said) -> None:
    seed(engine, *LESSONS)
    plant(engine, pb_1=E[1], pb_2=E[0])
    embed_as({WEBHOOK: vector})
    result = search(engine, WEBHOOK)
    assert result.rerank == "fallback" and said in result.rerank_reason
    assert ids(result) == ["pb-1", "pb-2"]


def test_no_embeddings_yet_falls_back_and_says_so(engine: Engine, embed_as) -> None:
    seed(engine, *LESSONS)
    embed_as({WEBHOOK: E[0]})
    result = search(engine, WEBHOOK)
    assert result.rerank == "fallback" and MODEL in result.rerank_reason
    assert ids(result) == ["pb-1", "pb-2"]


def test_an_embedding_by_another_model_is_not_used(engine: Engine, embed_as) -> None:
    seed(engine, *LESSONS)
    plant(engine, pb_1=E[1], pb_2=E[0])
    with transaction(engine) as session:
        text = lifecycle.get(session, "pb-3").text
        vectors.save(session, "pb-3", model="other", text_hash=vectors.text_hash(text), vector=E[2])
    embed_as({FAILOVER: E[2]})
    assert ids(search(engine, FAILOVER)) == []


def test_a_stale_embedding_after_an_edit_is_not_used(engine: Engine, embed_as) -> None:
    seed(engine, *LESSONS)
    plant(engine, pb_1=E[1], pb_2=E[0], pb_3=E[2])
    embed_as({FAILOVER: E[2], WEBHOOK: E[0]})
    assert ids(search(engine, FAILOVER, k=1)) == ["pb-3"]  # the index has read the vectors
    with transaction(engine) as session:
        lifecycle.edit(session, "pb-3", actor="t", text="Pin the chromium version in CI")
        lifecycle.edit(session, "pb-2", actor="t", text="Webhook retries lock the orders row")
    # Its vector was computed from the old text: it no longer says what the lesson says.
    assert "pb-3" not in ids(search(engine, FAILOVER))
    result = search(engine, WEBHOOK)
    edited = next(h for h in result.hits if h.bullet_id == "pb-2")
    assert edited.similarity is None and edited.text_rank == 2
    # Re-embedded for its new text, it counts again.
    plant(engine, pb_3=E[2])
    assert ids(search(engine, FAILOVER, k=1)) == ["pb-3"]


def test_lessons_without_an_embedding_keep_their_text_place(engine: Engine, embed_as) -> None:
    seed(
        engine,
        ("Webhook retries are logged", "CTMS"),  # pb-1
        ("Webhook retries back off", "CTMS"),  # pb-2
        ("Webhook retries need a key", "CTMS"),  # pb-3
    )
    text_order = ids(search(engine, "webhook retries"))
    first, second, third = text_order
    # Only the second and third are embedded: one like the ticket, one not at all.
    plant(engine, **{second.replace("-", "_"): E[0], third.replace("-", "_"): E[1]})
    embed_as({"webhook retries": E[0]})
    result = search(engine, "webhook retries")
    by_id = {h.bullet_id: h for h in result.hits}
    assert by_id[first].similarity is None and by_id[first].text_rank == 1
    # Neutral, not zero: it stays above the embedded lesson that is unlike the ticket.
    assert ids(result) == [second, first, third]


def test_the_budget_and_k_hold_with_the_rerank(engine: Engine, embed_as) -> None:
    seed(engine, *LESSONS)
    plant(engine, pb_1=E[1], pb_2=E[0], pb_3=E[0])
    embed_as({WEBHOOK: E[0]})
    result = search(engine, WEBHOOK, k=2, max_chars=90)
    assert len(result.hits) <= 2
    assert sum(len(h.text) for h in result.hits) <= 90
    assert ids(search(engine, WEBHOOK, k=1)) == ["pb-2"]


def test_a_search_recorded_with_the_rerank_records_the_shown_lessons(
    engine: Engine, embed_as
) -> None:
    seed(engine, *LESSONS)
    plant(engine, pb_3=E[2])
    embed_as({FAILOVER: E[2]})
    with transaction(engine) as session:
        result = Retriever.shared(session).search(
            session, Ticket.from_text(FAILOVER, scope="CTMS", key="CTMS-77"), record=True
        )
    assert ids(result) == ["pb-3"]
    with transaction(engine) as session:
        assert lifecycle.get(session, "pb-3").loads == 1

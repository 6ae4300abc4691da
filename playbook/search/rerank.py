"""The semantic rerank: the ticket's embedding, its settings, the blend of rank and cosine."""

from __future__ import annotations

import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

# What `SearchResult.rerank` says: no embedder configured, the blend ranked the lessons, or
# the text ranking answered alone (with a reason).
OFF, USED, FALLBACK = "off", "used", "fallback"
# The similarity's share of the blend. Measured on the shared duplicate-ticket dataset with a
# small general sentence model (MiniLM, bench/dup_recall.py --embeddings): 0.3 at 100
# candidates was the best weight on the tuning half and changed Recall@5 by one ticket overall;
# no blend beat the text ranking by more than noise, so the rerank is off unless a model is
# configured. See the README's "Semantic rerank (optional)".
DEFAULT_WEIGHT = 0.3
DEFAULT_CANDIDATES = 100


@dataclass(frozen=True)
class QueryEmbedding:
    """A ticket's embedding by ``model``, or no vector and the reason (endpoint slow, down...)."""

    vector: np.ndarray | None
    model: str
    reason: str | None = None


@dataclass
class RerankConfig:
    """How many candidates each side brings, the similarity's weight, and its floor."""

    candidates: int = DEFAULT_CANDIDATES
    weight: float = DEFAULT_WEIGHT
    # A lesson found by similarity only (no text match among the candidates) needs a cosine
    # above this; text candidates are blended whatever their cosine.
    min_similarity: float = 0.0


@dataclass(frozen=True)
class Blended:
    """One candidate's place in the blend: its text rank, its cosine, and the blended score."""

    bullet_id: str
    text_rank: int | None  # None: found by similarity only
    similarity: float | None  # None: no usable embedding (missing, or stale after an edit)
    blended: float


def blend(
    text_ids: Sequence[str], similar: Mapping[str, float], *, weight: float, candidates: int
) -> list[Blended]:
    """Rank the text candidates and the similarity candidates together, best first.

    ``blended = (1 - weight) * text_part + weight * similarity``, where ``text_part`` is
    ``1 - (rank - 1) / candidates`` for the text ranking's first ``candidates`` lessons and 0
    for a lesson found by similarity only. A text candidate without a usable embedding takes
    the median similarity of the text candidates that have one: neutral, so it keeps about its
    text place among its neighbours instead of falling below every embedded lesson (as 0
    would make it) or rising above them (as 1 would).
    """
    text_ids = list(text_ids)[:candidates]
    known = [similar[i] for i in text_ids if i in similar]
    neutral = statistics.median(known) if known else 0.0
    ranked = {bullet_id: rank for rank, bullet_id in enumerate(text_ids, start=1)}
    found = list(dict.fromkeys([*text_ids, *similar]))
    out = []
    for bullet_id in found:
        rank = ranked.get(bullet_id)
        text_part = 1 - (rank - 1) / candidates if rank is not None else 0.0
        similarity = similar.get(bullet_id)
        score = (1 - weight) * text_part + weight * (neutral if similarity is None else similarity)
        out.append(Blended(bullet_id, rank, similarity, float(score)))
    # Ties go to the better text rank, then the id: the same order in every process.
    out.sort(key=lambda b: (-b.blended, b.text_rank or len(found) + 1, b.bullet_id))
    return out


class NoRerank(Exception):
    """The rerank cannot rank this search: its message is the reason given with the answer."""


def embed(
    embedder: Callable[[str], QueryEmbedding] | None, text: str
) -> tuple[QueryEmbedding | None, str | None]:
    """The searched text's embedding by ``embedder``, or None and why not (None, None: off)."""
    if embedder is None:
        return None, None
    try:
        embedding = embedder(text)
    except Exception as error:  # an embedder's failure must not fail the search
        # The type only: an exception's message may carry an endpoint's URL or key.
        return None, f"embedding failed ({type(error).__name__}); ranked by text"
    if embedding.vector is None:
        return None, embedding.reason or "no embedding for the ticket; ranked by text"
    vector = np.asarray(embedding.vector, dtype=np.float32).ravel()
    return QueryEmbedding(vector, embedding.model, embedding.reason), None

"""Retrieval: the lessons that matter for a ticket, ranked, and recorded as loads when shown."""

from __future__ import annotations

import threading
import time
import uuid
import weakref
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

import numpy as np
from sqlalchemy import Engine, bindparam, select
from sqlalchemy.orm import Session

from playbook import clock
from playbook.anchors import matching
from playbook.errors import InvalidInput
from playbook.models import Bullet
from playbook.outcomes import usage
from playbook.search import anchored, calibration, ranking, relevance, rerank, vectors
from playbook.search.rerank import QueryEmbedding, RerankConfig
from playbook.search.search_log import (  # noqa: F401 (the log's names, as callers know them)
    HELD_OUT,
    TEXT_CHARS,
    TITLE_CHARS,
    _load_key,
    _log,
    _shown_key,
    record_held_out,
    record_shown,
    record_shown_ids,
    searched_text,
)
from playbook.search.sync import PROPOSED, SyncedIndex
from playbook.search.text import Ticket, query_tokens, synthesize_query

# Non-feedback modes re-rank this many of the best BM25 matches: past that, a match is too
# weak for usage to make it the right lesson.
POOL = 50
# Told the consumer and the seconds of each search. The service's metrics listen here, so
# the domain stays free of any metrics library.
search_listeners: list[Callable[[str, float], None]] = []
# The semantic rerank: set by the bot when an embedding model is configured. Called with the
# ticket's searched text; it answers in its own short time, with no vector and a reason when
# the endpoint is slow or down. None (the default): searches rank by text alone.
query_embedder: Callable[[str], QueryEmbedding] | None = None
rerank_config = RerankConfig()


@dataclass(frozen=True)
class Hit:
    """One ranked lesson, with the parts of its score when asked to explain."""

    bullet_id: str
    text: str
    rank: int
    score: float
    learned_from: str | None
    scope: str
    tags: tuple[str, ...]
    cites: int
    cites_success: int
    cites_failure: int
    bm25: float
    multiplier: float
    confidence: float
    freshness: float = 1.0
    # The ratings' part of ``multiplier`` and what it comes from: how many model ratings the
    # lesson has and their mean (None: not rated), for `search --explain` to tell apart.
    rating_multiplier: float = 1.0
    ratings: int = 0
    rating_mean: float | None = None
    # With the semantic rerank: the cosine with the ticket (None: no usable embedding), the
    # place in the text ranking (None: found by similarity only) and the blended score.
    similarity: float | None = None
    text_rank: int | None = None
    blended: float | None = None
    # The estimated probability that the lesson fits the ticket (`playbook.search.relevance`),
    # with the scope's recalibration applied, and the ticket's words it matched.
    relevance: float | None = None
    matched: tuple[str, ...] = ()
    # What a merged PR did to the code it is anchored to, while flagged (`playbook.anchors`).
    stale_detail: str | None = None
    # What of its anchors the ticket names (`playbook.anchors`), which raised it; else None.
    anchor: str | None = None


@dataclass(frozen=True)
class SearchResult:
    """The hits of one search and the query id later cites can refer to."""

    query_id: str
    hits: list[Hit] = field(default_factory=list)
    query: str = ""
    # "off" (no embedder), "used", or "fallback" (ranked by text; `rerank_reason` says why).
    rerank: str = rerank.OFF
    rerank_reason: str | None = None


class AllScopes:
    """Search every scope's active lessons: for a caller not bound to one repo or project."""


ALL_SCOPES = AllScopes()


def forget_shared() -> None:
    """Drop every process-wide index: for when a database was emptied or restored under it."""
    with _SHARED_LOCK:
        _SHARED.clear()
    vectors.forget_shared()
    calibration.forget()
    anchored.forget()


def _anchored(fit: float, hit: Hit) -> float:
    # A lesson raised by its anchor: the anchor is evidence the words' estimate cannot see.
    return anchored.estimate(fit) if hit.anchor else fit


class Retriever(SyncedIndex):
    """The process's synced index, searched: ranks a ticket's lessons and records what it shows."""

    @classmethod
    def shared(cls, session: Session) -> Retriever:
        """The process's retriever for the session's database (one index per database)."""
        engine = session.get_bind()
        engine = getattr(engine, "engine", engine)
        with _SHARED_LOCK:
            retriever = _SHARED.get(engine)
            if retriever is None:
                retriever = _SHARED[engine] = cls()
            return retriever

    def search(
        self,
        session: Session,
        ticket: Ticket,
        *,
        k: int = 5,
        rank_by: str = "feedback",
        max_chars: int | None = None,
        record: bool = False,
        query_id: str | None = None,
        scopes: Iterable[str] | AllScopes | None = None,
        consumer: str = "retrieval",
        source: str | None = None,
        min_relevance: float | None = None,
    ) -> SearchResult:
        """Rank the active lessons in the ticket's scope (and global) for ``ticket``.

        Only lessons sharing a word with the ticket are ranked, unless the semantic rerank is
        on (`query_embedder`): then the lessons most like the ticket by embedding join the
        text ranking's first candidates, ranked by a blend of both. With ``record``, every
        lesson shown is a ``loaded`` event for the ticket, once per ticket and lesson (once per
        query id without a ticket key).
        ``source`` is the agent that named the ticket: its loads weigh as its reports do.
        Every hit carries its relevance estimate; with ``min_relevance``, those below it are
        left out (and the rest ranked again from 1).
        """
        if rank_by not in ranking.RANK_MODES:
            raise InvalidInput(f"rank_by must be one of {', '.join(ranking.RANK_MODES)}")
        if k < 1:
            raise InvalidInput("k must be at least 1")
        started = time.perf_counter()
        self.sync(session)
        if isinstance(scopes, AllScopes):
            with self._lock:
                names = self._index.scope_names()
            allowed = {name for name in names if not name.startswith(PROPOSED)}
        elif scopes is not None:
            allowed = set(scopes)
        else:
            allowed = {"global", *([ticket.scope] if ticket.scope else [])}
        tokens = query_tokens(ticket)
        query_id = query_id or uuid.uuid4().hex
        embedding, reason = rerank.embed(query_embedder, synthesize_query(ticket))
        used = rerank.OFF if query_embedder is None else rerank.FALLBACK
        if embedding is not None:
            try:
                hits = self._reranked(session, tokens, allowed, k, rank_by, max_chars, embedding)
                used = rerank.USED
            except rerank.NoRerank as error:
                reason = str(error)
        if used != rerank.USED:
            named = matching.named_in(
                matching.ticket_text(ticket.summary, ticket.description), ticket.paths
            )
            hits = self._rank(session, tokens, allowed, k, rank_by, max_chars, named)
        hits = self._estimate(session, ticket, tokens, hits)
        if min_relevance is not None:
            kept = [hit for hit in hits if (hit.relevance or 0.0) >= min_relevance]
            hits = [replace(hit, rank=i) for i, hit in enumerate(kept, 1)]
        if record:
            # An agent's or the command line's text for the ticket, not the ticket's own summary:
            # kept as the text searched, but not as its title.
            searched = ticket if ticket.key else None
            _log(session, ticket.key, query_id, rank_by, hits, searched, titled=False)
        if record and hits:
            usage.record(
                session,
                "loaded",
                [hit.bullet_id for hit in hits],
                ticket_key=ticket.key,
                ranks=[hit.rank for hit in hits],
                query_id=query_id,
                consumer=consumer,
                source=source,
                # Once per ticket and lesson, as a comment's loads are: searching again for
                # the same ticket shows the lesson again, it does not load it twice.
                dedup_keys=[
                    _shown_key(ticket.key, hit.bullet_id)
                    if ticket.key
                    else _load_key(query_id, hit.bullet_id)
                    for hit in hits
                ],
            )
        elapsed = time.perf_counter() - started
        for listener in search_listeners:
            listener(consumer, elapsed)
        return SearchResult(
            query_id=query_id,
            hits=hits,
            query=" ".join(tokens),
            rerank=used,
            rerank_reason=reason,
        )

    def _estimate(
        self, session: Session, ticket: Ticket, tokens: list[str], hits: list[Hit]
    ) -> list[Hit]:
        """The hits with their relevance estimate and matched words (well under 1 ms for 20)."""
        if not hits:
            return hits
        idf = self.idfs(tokens)
        model = relevance.default_model()
        features = relevance.extract(ticket, hits, idf, tokens, only=model.features)
        shift = calibration.shift(session, ticket.scope or "global")
        words = relevance.ticket_words(ticket)
        return [
            replace(
                hit,
                relevance=round(_anchored(relevance.shifted(model.probability(f), shift), hit), 6),
                matched=relevance.matched_words(ticket, hit.text, hit.tags, idf, words=words),
            )
            for hit, f in zip(hits, features, strict=True)
        ]

    def _rank(
        self,
        session: Session,
        tokens: list[str],
        scopes: set[str],
        k: int,
        rank_by: str,
        max_chars: int | None,
        named: matching.Named | None = None,
    ) -> list[Hit]:
        scored = self._ordered(session, tokens, scopes, k, rank_by, max_chars)
        if named:
            scored = self._anchored(session, scored, named, scopes, rank_by)
        return _hits(scored, k, max_chars)

    def _anchored(
        self,
        session: Session,
        scored: list[_Scored],
        named: matching.Named,
        scopes: set[str],
        rank_by: str,
    ) -> list[_Scored]:
        """The candidates with the lessons anchored to what the ticket names first.

        Those share no word with the ticket are looked up by their anchors and joined with
        a text score of 0; each raised lesson's score is ANCHOR_BOOST times its own.
        """
        found = anchored.lessons_named(session, named, scopes)
        if not found:
            return scored
        have = {item.bullet_id for item in scored}
        extra = [(bullet_id, 0.0) for bullet_id in sorted(found) if bullet_id not in have]
        joined = scored + self._score(session, extra, rank_by, clock.now(), True)
        raised = [
            replace(item, score=item.score * anchored.ANCHOR_BOOST, anchor=found[item.bullet_id])
            for item in joined
            if item.bullet_id in found
        ]
        raised.sort(key=lambda item: (-item.score, item.bullet_id))
        return raised + [item for item in scored if item.bullet_id not in found]

    def _reranked(
        self,
        session: Session,
        tokens: list[str],
        scopes: set[str],
        k: int,
        rank_by: str,
        max_chars: int | None,
        embedding: QueryEmbedding,
    ) -> list[Hit]:
        """The text ranking's first candidates and the nearest by embedding, blended."""
        n = max(rerank_config.candidates, k)
        index = vectors.VectorIndex.shared(session)
        index.sync(session, embedding.model)
        if not len(index):
            model = embedding.model
            raise rerank.NoRerank(f"no lesson has an embedding by {model} yet; ranked by text")
        try:
            nearest = index.top(embedding.vector, n, scopes=scopes)
            # A lesson found by similarity alone must be like the ticket at all: otherwise a
            # ticket nothing fits would still be shown k lessons.
            similar = {i: s for i, s in nearest if s > rerank_config.min_similarity}
            text = self._ordered(session, tokens, scopes, n, rank_by, None, fetch=n)[:n]
            similar.update(index.cosines(embedding.vector, [s.bullet_id for s in text]))
        except vectors.UnusableQuery as error:
            raise rerank.NoRerank(f"{error}; ranked by text") from error
        order = rerank.blend(
            [s.bullet_id for s in text], similar, weight=rerank_config.weight, candidates=n
        )
        # The lessons found by similarity only are read (and scored as the text ranking scores
        # a lesson, so their counters show) only as far down the blend as the answer reaches;
        # one no longer active drops out.
        known = {s.bullet_id: s for s in text}
        asked: set[str] = set()
        now = clock.now()
        reach = k * 2 if max_chars is None else k * 8  # a budget may skip long lessons
        while True:
            head = order[:reach]
            seen = known.keys() | asked
            extra = [(b.bullet_id, 0.0) for b in head if b.bullet_id not in seen]
            asked.update(bullet_id for bullet_id, _ in extra)
            known.update((s.bullet_id, s) for s in self._score(session, extra, rank_by, now, True))
            ranked = [(known[b.bullet_id], b) for b in head if b.bullet_id in known]
            places = {b.bullet_id: b for _, b in ranked}
            hits = _hits([s for s, _ in ranked], k, max_chars, places)
            if len(hits) == k or reach >= len(order):
                return hits
            reach *= 4

    def _ordered(
        self,
        session: Session,
        tokens: list[str],
        scopes: set[str],
        k: int,
        rank_by: str,
        max_chars: int | None,
        fetch: int | None = None,
    ) -> list[_Scored]:
        """The candidates by text, best first: at least the first ``k`` in their right order.

        With ``fetch`` (the rerank's candidates), the index's first ``fetch`` matches scored in
        one pass: a lesson that only its cites would lift from further down is left to the
        similarity side, which saves the rerank re-reading several times as many lessons.
        """
        wanted = max(k * 4, 20) if rank_by in ("feedback", "bm25") else POOL
        if max_chars is not None:
            wanted *= 2  # the budget may skip long lessons
        now = clock.now()
        if rank_by != "feedback":
            with self._lock:
                matches = self._index.search(tokens, k=fetch or wanted, scopes=scopes)
            return self._score(session, matches, rank_by, now)
        weigh = _freshness_at(now)
        moved: set[str] | None = None
        while True:
            if fetch is not None:
                wanted = fetch
            with self._lock:
                ranked = self._index.ranked(tokens, wanted, scopes, weigh=weigh)
            matches = [(bullet_id, bm25) for bullet_id, bm25, _ in ranked]
            if len(ranked) < wanted or fetch is not None:  # every match is here, or enough
                return self._score(session, matches, rank_by, now)
            # The index orders by BM25 times freshness since each lesson's last change, which
            # is a lesson's whole score unless a cite has refreshed it since or its ratings
            # raise it. Score those lessons wherever they rank; then no unfetched lesson can
            # beat the weakest fetched key.
            if moved is None:
                moved = self._moved(session, scopes)
            fetched = {bullet_id for bullet_id, _ in matches}
            with self._lock:
                extra = self._index.scores_of(tokens, moved - fetched)
            scored = self._score(session, matches + sorted(extra.items()), rank_by, now)
            weakest = ranked[-1][2]
            if len(scored) >= k and 0 <= weakest <= scored[k - 1].score:
                return scored
            wanted *= 4

    def _moved(self, session: Session, scopes: set[str]) -> set[str]:
        """Active lessons cited since their last change, or rated up: the index underrates them."""
        rows = session.connection().execute(_CITED)
        moved = {
            row.id
            for row in rows
            if row.status == "active"
            and row.scope in scopes
            and (
                row.cites_success > row.cites_failure
                or (row.updated_at is None or row.last_cited_at > row.updated_at)
            )
        }
        # A model's ratings can lift a lesson the cites do not: those rated up on the whole.
        rated = session.connection().execute(_RATED_UP)
        return moved | {row.id for row in rated if row.status == "active" and row.scope in scopes}

    def _score(
        self,
        session: Session,
        matches: list[tuple[str, float]],
        rank_by: str,
        now: datetime,
        unmatched: bool = False,
    ) -> list[_Scored]:
        if not matches:
            return []
        # Here and in `_moved`, statements built once and run on the session's connection:
        # building a statement and the ORM's own execution cost more than these small
        # queries, and `sync` has flushed the session.
        # The columns that rank and those a hit shows, in one query: a search weighs a few
        # dozen candidates, whose texts are at most a few kilobytes each.
        rows = {
            row.id: row
            for row in session.connection().execute(
                _CANDIDATES, {"ids": [bullet_id for bullet_id, _ in matches]}
            )
        }
        best = max(score for _, score in matches) or 1.0
        scored = []
        for bullet_id, bm25 in matches:
            row = rows.get(bullet_id)
            if row is None or row.status != "active" or (bm25 <= 0 and not unmatched):
                continue  # changed since the last sync (the next sync drops it), or no match
            rated = ranking.rating_multiplier(row.ratings, row.rating_sum)
            multiplier = ranking.feedback_multiplier(row.cites_success, row.cites_failure) * rated
            last_used = max((t for t in (row.last_cited_at, row.last_loaded_at) if t), default=None)
            confidence = ranking.confidence(
                row.cites_success, row.cites_failure, last_used_at=last_used, now=now
            )
            # Idle since its last change (learned, edited, approved, restored) or cite.
            fresh = ranking.freshness(max(t for t in (row.updated_at, row.last_cited_at) if t), now)
            if rank_by == "feedback":
                score = float(ranking.weighted(bm25, multiplier * fresh))
                order: tuple[float, ...] = (score,)
            elif rank_by == "bm25":
                score, order = bm25, (bm25,)
            elif rank_by == "reinforcements":
                recency = row.last_cited_at.timestamp() if row.last_cited_at else float("-inf")
                score, order = float(row.cites), (row.cites, recency, bm25)
            elif rank_by == "confidence":
                score, order = confidence, (confidence, bm25)
            else:  # hybrid
                score = ranking.HYBRID_ALPHA * bm25 / best + (1 - ranking.HYBRID_ALPHA) * confidence
                order = (score,)
            scored.append(
                _Scored(bullet_id, score, bm25, multiplier, confidence, fresh, order, row, rated)
            )
        scored.sort(key=lambda item: (tuple(-x for x in item.order), item.bullet_id))
        return scored


# What ranking reads of a candidate, and what a hit shows.
_RANKED = (
    Bullet.id,
    Bullet.text,
    Bullet.learned_from,
    Bullet.scope,
    Bullet.tags,
    Bullet.status,
    Bullet.cites,
    Bullet.cites_success,
    Bullet.cites_failure,
    Bullet.updated_at,
    Bullet.last_cited_at,
    Bullet.last_loaded_at,
    Bullet.ratings,
    Bullet.rating_sum,
    Bullet.stale_detail,
)


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
# Lessons ever cited, asked as a range so that both databases answer from the `last_cited_at`
# index (few lessons are ever cited; SQLite scans the table for IS NOT NULL). Given the status
# or scope too, SQLite would plan on their indexes and read every active lesson of the scope,
# so those are checked in Python.
_CITED = select(
    Bullet.id,
    Bullet.status,
    Bullet.scope,
    Bullet.cites_success,
    Bullet.cites_failure,
    Bullet.last_cited_at,
    Bullet.updated_at,
).where(Bullet.last_cited_at > _EPOCH)
_RATED_UP = select(Bullet.id, Bullet.status, Bullet.scope).where(Bullet.rating_sum > 0)
_CANDIDATES = select(*_RANKED).where(Bullet.id.in_(bindparam("ids", expanding=True)))


@dataclass(frozen=True)
class _Scored:
    """A candidate's score and its parts, before its row is loaded to show it."""

    bullet_id: str
    score: float
    bm25: float
    multiplier: float
    confidence: float
    freshness: float
    order: tuple[float, ...]
    row: Any  # the bullet's columns in _RANKED
    rating_multiplier: float = 1.0
    anchor: str | None = None  # what of its anchors the ticket names (`Hit.anchor`)


def _freshness_at(now: datetime) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    """BM25 scores weighed by freshness at ``now`` since the stamped last change (epoch s)."""
    seconds = now.timestamp()
    return lambda scores, stamps: ranking.weighted(
        scores, ranking.faded(np.maximum(seconds - stamps, 0.0) / 86400)
    )


def _hits(
    scored: list[_Scored],
    k: int,
    max_chars: int | None,
    blended: dict[str, rerank.Blended] | None = None,
) -> list[Hit]:
    """The first ``k`` candidates whose texts fit in ``max_chars`` together, as ranked hits."""
    hits: list[Hit] = []
    used = 0
    for item in scored:
        bullet = item.row
        if len(hits) == k:
            break
        # With a budget, a shorter lower-ranked lesson may take the place of a long one.
        if max_chars is not None and used + len(bullet.text) > max_chars:
            continue
        used += len(bullet.text)
        place = (blended or {}).get(bullet.id)
        hits.append(
            Hit(
                bullet_id=bullet.id,
                text=bullet.text,
                rank=len(hits) + 1,
                score=item.score,
                learned_from=bullet.learned_from,
                scope=bullet.scope,
                tags=tuple(bullet.tags or ()),
                cites=bullet.cites,
                cites_success=bullet.cites_success,
                cites_failure=bullet.cites_failure,
                bm25=item.bm25,
                multiplier=item.multiplier,
                confidence=item.confidence,
                freshness=item.freshness,
                rating_multiplier=item.rating_multiplier,
                ratings=bullet.ratings,
                rating_mean=bullet.rating_sum / bullet.ratings if bullet.ratings else None,
                similarity=place.similarity if place else None,
                text_rank=place.text_rank if place else None,
                blended=place.blended if place else None,
                stale_detail=bullet.stale_detail,
                anchor=item.anchor,
            )
        )
    return hits


_SHARED: weakref.WeakKeyDictionary[Engine, Retriever] = weakref.WeakKeyDictionary()
_SHARED_LOCK = threading.Lock()

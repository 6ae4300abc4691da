"""The semantic rerank's added search latency at 100,000 lessons, beside the text-only search.

Usage: python bench/semantic_speed.py [--lessons 100000] [--dim 384] [--candidates 100]
           [--queries 300] [--database-url postgresql+psycopg://user@host/db]
           [--exact-only] [--dataset PATH | --generated]

Lessons are the dataset's tickets (recombined past its size, as bench/retrieval_speed.py makes
them), spread over scopes: SCOPE_SHARE of them in the tickets' scope, GLOBAL_SHARE global and
the rest over OTHER_SCOPES other scopes, so the similarity search filters by scope as a real
multi-repository playbook makes it. Each lesson has a random unit embedding of ``--dim``
dimensions (stored as the worker stores them, bulk-inserted); each ticket's query vector is
one lesson's vector plus noise, computed before the run: the endpoint's own time is not part of
what is measured. In one process, on one playbook, every ticket is searched twice in turn, each
search in its own transaction as the service runs it: by text alone (no embedder) and with the
rerank (an embedder that returns the precomputed vector at once). Reported: p50/p95 of both and
of the per-ticket difference, the vector index's first load, and `VectorIndex.top` alone,
exact (numpy) and, when usearch is installed, approximate (HNSW) with its build time and its
recall of the exact top ``--candidates`` (of which only the first, the lesson a query was
planted near, is really alike: random vectors are the hardest case for a graph) and how often it
finds that first one. Last, a few searches whose endpoint takes the connection and never answers
(PLAYBOOK_EMBEDDING_TIMEOUT_SECONDS at 0.5 s, the real client): each answers by text after about
the timeout, beside the same searches with no endpoint. Ends with one JSON line.
"""

from __future__ import annotations

import argparse
import json
import random
import socket
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np
from sqlalchemy import Engine, insert, text, update

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import datasets  # noqa: E402
import machine  # noqa: E402
from datasets import ticket  # noqa: E402
from retrieval_speed import (  # noqa: E402
    lessons,
    log,
    ms,
    percentile,
    postgres_playbook,
    sqlite_playbook,
)

from playbook import clock, db  # noqa: E402
from playbook.models import Bullet, Embedding, PlaybookMeta  # noqa: E402
from playbook.search import retrieval, vectors  # noqa: E402
from playbook.search.rerank import QueryEmbedding, RerankConfig  # noqa: E402
from playbook.search.retrieval import Retriever  # noqa: E402
from playbook.search.text import Ticket, synthesize_query  # noqa: E402

SCOPE = "BENCH"
SCOPE_SHARE = 0.6
GLOBAL_SHARE = 0.1
OTHER_SCOPES = 30
MODEL = "bench-random"
WARM_UP = 20
NOISE = 0.5  # a query vector is a lesson's vector plus this much noise (per unit of norm)
GOAL_ADDED_P50_MS = 20.0
BUILD_WAIT_S = 1_800
BATCH = 5_000
STALLED_TIMEOUT_S = 0.5


def unit_vectors(count: int, dim: int, rng: np.random.Generator) -> np.ndarray:
    """``count`` random unit float32 vectors."""
    matrix = rng.standard_normal((count, dim), dtype=np.float32)
    matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
    return matrix


def scope_of(n: int, rng: random.Random) -> str:
    """A lesson's scope: the tickets' scope, global, or one of the others."""
    draw = rng.random()
    if draw < SCOPE_SHARE:
        return SCOPE
    if draw < SCOPE_SHARE + GLOBAL_SHARE:
        return "global"
    return f"other/repo-{n % OTHER_SCOPES}"


def fill(
    engine: Engine, made: list[tuple[str, list]], matrix: np.ndarray, rng: random.Random
) -> float:
    """Insert the lessons and their embeddings in bulk, versions as if written one by one."""
    started = time.perf_counter()
    now = clock.now()
    count = len(made)
    for start in range(0, count, BATCH):
        bullets, embeddings = [], []
        for n, (body, labels) in enumerate(made[start : start + BATCH], start + 1):
            changed = now - timedelta(days=rng.uniform(0, 730))
            scope = scope_of(n, rng)
            bullets.append(
                {
                    "id": f"pb-{n}",
                    "number": n,
                    "text": body,
                    "section": "best_practice",
                    "tags": labels,
                    "scope": scope,
                    "learned_from": f"{SCOPE}-{n}",
                    "source": "bench",
                    "status": "active",
                    "created_at": changed,
                    "updated_at": changed,
                    "loads": 0,
                    "cites": 0,
                    "cites_success": 0,
                    "cites_failure": 0,
                    "version": n,
                }
            )
            embeddings.append(
                {
                    "bullet_id": f"pb-{n}",
                    "model": MODEL,
                    "text_hash": vectors.text_hash(body),
                    "dim": matrix.shape[1],
                    "vector": matrix[n - 1].astype("<f4").tobytes(),
                    "version": n,
                    "computed_at": now,
                }
            )
        with db.transaction(engine) as session:
            session.execute(insert(Bullet), bullets)
            session.execute(insert(Embedding), embeddings)
    with db.transaction(engine) as session:
        for key in ("version", vectors.COUNTER):
            session.execute(update(PlaybookMeta).where(PlaybookMeta.key == key).values(value=count))
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as connection:
        connection.execute(text("ANALYZE"))
    return time.perf_counter() - started


def search_pairs(
    engine: Engine, tickets: list[Ticket], planted: dict[str, np.ndarray]
) -> dict[str, Any]:
    """Each ticket searched by text alone and with the rerank, in turn; their latencies."""

    def embedder(searched: str) -> QueryEmbedding:
        return QueryEmbedding(planted[searched], MODEL)

    def search(query: Ticket, rerank: bool) -> tuple[float, Any]:
        retrieval.query_embedder = embedder if rerank else None
        started = time.perf_counter()
        with db.transaction(engine) as session:
            result = Retriever.shared(session).search(session, query, k=5)
        took = time.perf_counter() - started
        retrieval.query_embedder = None
        return took, result

    first_text, _ = search(tickets[0], False)
    first_rerank, result = search(tickets[0], True)
    assert result.rerank == "used", result.rerank_reason
    for query in tickets[:WARM_UP]:
        search(query, False)
        search(query, True)
    plain, reranked, added, from_similarity = [], [], [], 0
    for n, query in enumerate(tickets):
        # Alternating which goes first, so neither always finds the caches the other warmed.
        order = (False, True) if n % 2 else (True, False)
        took = {}
        for rerank in order:
            took[rerank], result = search(query, rerank)
            if rerank:
                from_similarity += sum(hit.text_rank is None for hit in result.hits)
        plain.append(took[False])
        reranked.append(took[True])
        added.append(took[True] - took[False])
    return {
        "first_text_search_s": round(first_text, 2),
        "first_rerank_search_s": round(first_rerank, 2),  # loads the vector index
        "text_p50_ms": ms(percentile(plain, 0.5)),
        "text_p95_ms": ms(percentile(plain, 0.95)),
        "rerank_p50_ms": ms(percentile(reranked, 0.5)),
        "rerank_p95_ms": ms(percentile(reranked, 0.95)),
        "added_p50_ms": ms(percentile(added, 0.5)),
        "added_p95_ms": ms(percentile(added, 0.95)),
        "hits_from_similarity_only": from_similarity,
    }


def top_rows(
    engine: Engine, queries: list[np.ndarray], n: int, approximate: bool = True
) -> dict[str, Any]:
    """`VectorIndex.top` alone over the tickets' scopes: exact, then approximate if installed.

    The process's shared index, loaded afresh: once its graph is built, searches use it.
    """
    vectors.forget_shared()
    with db.transaction(engine) as session:
        index = vectors.VectorIndex.shared(session)
        loaded, _ = timed(lambda: index.sync(session, MODEL))
    scopes = {SCOPE, "global"}
    row: dict[str, Any] = {"load_s": round(loaded, 2), "vectors": len(index)}
    threshold = vectors.APPROXIMATE_MIN
    vectors.APPROXIMATE_MIN = sys.maxsize
    try:
        for q in queries[:WARM_UP]:
            index.top(q, n, scopes=scopes)
        latencies, exact = [], []
        for q in queries:
            took, found = timed(lambda q=q: index.top(q, n, scopes=scopes))
            latencies.append(took)
            exact.append([i for i, _ in found])
        row["exact_p50_ms"] = ms(percentile(latencies, 0.5))
        row["exact_p95_ms"] = ms(percentile(latencies, 0.95))
    finally:
        vectors.APPROXIMATE_MIN = threshold
    if vectors.graph_library() is None or not approximate:
        row["approximate"] = "usearch is not installed" if approximate else "not asked"
        return row
    vectors.APPROXIMATE_MIN = 0
    try:
        index.top(queries[0], n, scopes=scopes)  # starts the graph in the background
        built, ready = timed(lambda: index.approximate_ready.wait(BUILD_WAIT_S))
        if not ready:
            row["approximate"] = f"not built within {BUILD_WAIT_S} s"
            return row
        latencies, recall, first = [], [], []
        for q, truth in zip(queries, exact, strict=True):
            took, found = timed(lambda q=q: index.top(q, n, scopes=scopes))
            latencies.append(took)
            got = {i for i, _ in found}
            recall.append(len(got.intersection(truth)) / max(len(truth), 1))
            # The exact nearest is the lesson the query vector was planted near (cosine about
            # 0.9) when it is in scope; the rest of the exact top are random (about 0.1).
            first.append(bool(truth) and truth[0] in got)
    finally:
        vectors.APPROXIMATE_MIN = threshold
    row["approximate_build_s"] = round(built, 2)
    row["approximate_p50_ms"] = ms(percentile(latencies, 0.5))
    row["approximate_p95_ms"] = ms(percentile(latencies, 0.95))
    row["approximate_recall"] = round(float(np.mean(recall)), 4)
    row["approximate_finds_exact_first"] = round(float(np.mean(first)), 4)
    return row


def stalled_endpoint(
    engine: Engine, tickets: list[Ticket], timeout: float = STALLED_TIMEOUT_S, searches: int = 5
) -> dict[str, Any]:
    """Searches whose embedding endpoint takes the connection and never answers, each beside the
    same search with no endpoint (the baseline): the rerank's wait is the timeout, no longer."""
    from bot.config import Settings
    from bot.embeddings import query_embedder

    with socket.socket() as listener:
        # Listening is enough: the kernel completes the connection, and nobody ever answers.
        listener.bind(("127.0.0.1", 0))
        listener.listen(64)
        settings = Settings(
            _env_file=None,
            PLAYBOOK_DATABASE_URL="sqlite://",
            PLAYBOOK_MODEL_BASE_URL=f"http://127.0.0.1:{listener.getsockname()[1]}/v1",
            PLAYBOOK_EMBEDDING_MODEL=MODEL,
            PLAYBOOK_EMBEDDING_TIMEOUT_SECONDS=timeout,
        )
        stalled = query_embedder(settings)
        stalled("warm up: the client is made (and openai imported) on the first call")
        plain, waited = [], []
        try:
            for query in tickets[:searches]:
                for hook, into in ((None, plain), (stalled, waited)):
                    retrieval.query_embedder = hook
                    with db.transaction(engine) as session:
                        took, result = timed(
                            lambda s=session, q=query: Retriever.shared(s).search(s, q, k=5)
                        )
                    into.append(took)
                    assert hook is None or result.rerank == "fallback", result.rerank
        finally:
            retrieval.query_embedder = None
    return {
        "timeout_s": timeout,
        "text_p50_ms": ms(percentile(plain, 0.5)),
        "stalled_p50_ms": ms(percentile(waited, 0.5)),
        "stalled_max_ms": ms(max(waited)),
    }


def timed(call: Callable[[], Any]) -> tuple[float, Any]:
    """(seconds, result) of one call."""
    started = time.perf_counter()
    result = call()
    return time.perf_counter() - started, result


def run(
    name: str,
    playbook: Callable[[], AbstractContextManager[tuple[Engine, str]]],
    made: list[tuple[str, list]],
    matrix: np.ndarray,
    tickets: list[Ticket],
    planted: dict[str, np.ndarray],
    candidates: int,
    approximate: bool,
) -> dict[str, Any]:
    """Fill a playbook, then measure the search pairs and the similarity search alone."""
    with playbook() as (engine, _):
        log(f"{name}: filling {len(made):,} lessons with embeddings")
        filled = fill(engine, made, matrix, random.Random(7))
        log(f"  filled in {filled:.0f} s")
        retrieval.forget_shared()
        retrieval.rerank_config = RerankConfig(candidates=candidates)
        threshold = vectors.APPROXIMATE_MIN
        try:
            vectors.APPROXIMATE_MIN = sys.maxsize  # exact first, with no graph being built
            pairs = search_pairs(engine, tickets, planted)
            log(f"  text p50 {pairs['text_p50_ms']} ms, added p50 {pairs['added_p50_ms']} ms")
            stalled = stalled_endpoint(engine, tickets)
            log(f"  an endpoint that never answers: {stalled}")
            vectors.APPROXIMATE_MIN = threshold
            queries = [planted[synthesize_query(t)] for t in tickets]
            top = top_rows(engine, queries, candidates, approximate)
            log(f"  top alone: {top}")
            approximate = None
            if "approximate_p50_ms" in top and len(made) >= threshold:
                approximate = search_pairs(engine, tickets, planted)
                log(f"  with the graph: added p50 {approximate['added_p50_ms']} ms")
        finally:
            retrieval.rerank_config = RerankConfig()
            vectors.APPROXIMATE_MIN = threshold
        retrieval.forget_shared()
    return {
        "database": name,
        "fill_s": round(filled, 1),
        "exact": pairs,
        "approximate": approximate,
        "top": top,
        "stalled_endpoint": stalled,
    }


def main() -> None:
    """Measure on SQLite (and PostgreSQL when given); print a table and the JSON line."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--lessons", type=int, default=100_000)
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--candidates", type=int, default=100)
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--database-url", default=None, help="also run on this PostgreSQL")
    parser.add_argument(
        "--exact-only", action="store_true", help="skip the approximate graph (minutes to build)"
    )
    datasets.add_arguments(parser)
    args = parser.parse_args()
    dataset = datasets.from_arguments(args)
    rng = random.Random(42)
    picked = rng.sample(dataset.rows, args.queries)
    tickets = [ticket(r, scope=SCOPE) for r in picked]
    made = lessons(dataset.rows, args.lessons, rng)
    generator = np.random.default_rng(42)
    matrix = unit_vectors(len(made), args.dim, generator)
    planted = {}
    for query in tickets:
        near = matrix[generator.integers(len(made))]
        noise = unit_vectors(1, args.dim, generator)[0] * NOISE
        planted[synthesize_query(query)] = (near + noise).astype(np.float32)
    databases: list[tuple[str, Callable[[], Iterator[tuple[Engine, str]]]]] = [
        ("sqlite", sqlite_playbook)
    ]
    if args.database_url:
        databases.append(("postgresql", lambda: postgres_playbook(args.database_url)))
    info = machine.describe(args.database_url)
    results = [
        run(name, playbook, made, matrix, tickets, planted, args.candidates, not args.exact_only)
        for name, playbook in databases
    ]
    print(
        f"{args.lessons:,} lessons x {args.dim} dims, top {args.candidates} candidates each side,"
        f" {args.queries} tickets"
    )
    print("database    similarity  text p50/p95 ms   rerank p50/p95 ms   added p50/p95 ms")
    for row in results:
        for kind in ("exact", "approximate"):
            pairs = row[kind]
            if pairs is None:
                continue
            print(
                f"{row['database']:<11} {kind:<11} {pairs['text_p50_ms']:>7} / "
                f"{pairs['text_p95_ms']:<7} {pairs['rerank_p50_ms']:>7} / "
                f"{pairs['rerank_p95_ms']:<9} {pairs['added_p50_ms']:>7} / {pairs['added_p95_ms']}"
            )
        print(f"{row['database']:<11} top alone: {json.dumps(row['top'])}")
        wait = row["stalled_endpoint"]
        print(
            f"{row['database']:<11} endpoint never answering (timeout {wait['timeout_s']} s):"
            f" p50 {wait['stalled_p50_ms']} ms, max {wait['stalled_max_ms']} ms"
            f" (text alone p50 {wait['text_p50_ms']} ms)"
        )
    worst = max(
        min(p["added_p50_ms"] for p in (row["exact"], row["approximate"]) if p) for row in results
    )
    verdict = "met" if worst < GOAL_ADDED_P50_MS else "missed"
    print(f"goal added p50 < {GOAL_ADDED_P50_MS:g} ms: {verdict} ({worst} ms)")
    print(
        json.dumps(
            {
                "dataset": dataset.describe(),
                "machine": info,
                "lessons": args.lessons,
                "dim": args.dim,
                "candidates": args.candidates,
                "queries": args.queries,
                "results": results,
                "goal_added_p50": verdict,
            }
        )
    )


if __name__ == "__main__":
    main()

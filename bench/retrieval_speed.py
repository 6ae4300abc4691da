"""Retrieval speed: the incremental BM25 index against rank_bm25.BM25Okapi on the same corpus.

Usage: python bench/retrieval_speed.py [--sizes 1000,10000,100000] [--dataset PATH]

Playbooks are made from real Apache Jira tickets (summary + start of the description); past
the 7,983 tickets of the dataset, lessons are recombined from two tickets' sentences so every
lesson is distinct. Queries are other tickets synthesized as the product does. Reports index
build time, p50/p99 search latency, and how long an added bullet takes to become searchable.
Ends with one JSON line.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from pathlib import Path

from rank_bm25 import BM25Okapi

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from dup_recall import DEFAULT, lesson_text, load, ticket  # noqa: E402

from playbook.index import BM25Index  # noqa: E402
from playbook.text import bullet_tokens, query_tokens  # noqa: E402


def percentile(values: list[float], share: float) -> float:
    """The ``share`` quantile of ``values``."""
    ordered = sorted(values)
    return ordered[min(int(share * len(ordered)), len(ordered) - 1)]


def corpus(rows: list[dict], size: int, rng: random.Random) -> list[list[str]]:
    """``size`` lesson token lists from real tickets, recombined past the dataset's size."""
    base = [bullet_tokens(lesson_text(r), r.get("labels") or []) for r in rows]
    docs = list(base[:size])
    while len(docs) < size:
        a, b = rng.sample(base, 2)
        docs.append(a[: len(a) // 2] + b[len(b) // 2 :])
    return docs


def measure(size: int, rows: list[dict], queries: list[list[str]], rng: random.Random) -> dict:
    """Build, search and add timings at one playbook size."""
    docs = corpus(rows, size, rng)
    started = time.perf_counter()
    index = BM25Index()
    for i, tokens in enumerate(docs):
        index.add(f"pb-{i}", tokens)
    build = time.perf_counter() - started
    cold = []
    for query in queries[:20]:  # first searches fold pending postings into arrays
        t0 = time.perf_counter()
        index.search(query, k=5)
        cold.append((time.perf_counter() - t0) * 1000)
    for query in queries:
        index.search(query, k=5)
    latencies = []
    for query in queries:
        t0 = time.perf_counter()
        index.search(query, k=5)
        latencies.append((time.perf_counter() - t0) * 1000)
    adds = []
    for n in range(20):
        tokens = [f"freshword{n}", *docs[rng.randrange(size)][:30]]
        query = [f"freshword{n}", *queries[n]]
        t0 = time.perf_counter()
        index.add(f"new-{n}", tokens)
        index.search(query, k=5)  # a ticket-sized search right after the add
        adds.append((time.perf_counter() - t0) * 1000)
        assert index.search([f"freshword{n}"], k=1)[0][0] == f"new-{n}"
    started = time.perf_counter()
    reference = BM25Okapi(docs)
    reference_build = time.perf_counter() - started
    sample = queries[: 5 if size >= 100_000 else 30]
    reference_latencies = []
    for query in sample:
        t0 = time.perf_counter()
        reference.get_scores(query)
        reference_latencies.append((time.perf_counter() - t0) * 1000)
    return {
        "bullets": size,
        "build_s": round(build, 2),
        "p50_ms": round(percentile(latencies, 0.5), 3),
        "p99_ms": round(percentile(latencies, 0.99), 3),
        "cold_first_20_max_ms": round(max(cold), 1),
        "add_searchable_ms": round(percentile(adds, 0.5), 3),
        "add_searchable_max_ms": round(max(adds), 3),
        "rank_bm25_build_s": round(reference_build, 2),
        "rank_bm25_p50_ms": round(statistics.median(reference_latencies), 1),
        "speedup_p50": round(
            statistics.median(reference_latencies) / percentile(latencies, 0.5), 1
        ),
    }


def main() -> None:
    """Print the table and the JSON line."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--dataset", type=Path, default=DEFAULT)
    args = parser.parse_args()
    rng = random.Random(42)
    rows = load(args.dataset)
    queries = [query_tokens(ticket(r)) for r in rng.sample(rows, 300)]
    mean_tokens = statistics.mean(len(q) for q in queries)
    print(f"queries: 300 real tickets, {mean_tokens:.0f} tokens on average")
    print(
        f"{'bullets':>8} {'build s':>8} {'p50 ms':>8} {'p99 ms':>8} {'add ms':>8} | "
        f"{'rank_bm25 p50 ms':>16} {'speedup':>8}"
    )
    results = []
    for size in (int(s) for s in args.sizes.split(",")):
        r = measure(size, rows, queries, rng)
        results.append(r)
        print(
            f"{r['bullets']:>8} {r['build_s']:>8} {r['p50_ms']:>8} {r['p99_ms']:>8} "
            f"{r['add_searchable_ms']:>8} | {r['rank_bm25_p50_ms']:>16} {r['speedup_p50']:>7}x"
        )
    print(json.dumps({"results": results}))


if __name__ == "__main__":
    main()

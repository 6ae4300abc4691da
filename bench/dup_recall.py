"""Retrieval quality on real tickets: does the older of two duplicate Jira issues come back?

Usage: python bench/dup_recall.py [DATASET]   (default: ../shared/datasets/apache-jira-dev.jsonl.gz)

Issues are replayed in creation order. Each issue becomes a lesson when it is created (text =
summary + first 500 characters of the description, tags = labels + components, scope = its
project) in the same incremental index the product uses. For each `Duplicate` pair with both
ends in the file, the newer issue is a ticket searched at its creation time; the older issue is
the right answer. Recall@5 and MRR@10 count where it ranks. Ends with one JSON line.
"""

from __future__ import annotations

import gzip
import json
import re
import sys
import time
from pathlib import Path
from typing import Any

from rank_bm25 import BM25Okapi

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from playbook.index import BM25Index  # noqa: E402
from playbook.text import DESCRIPTION_CHARS, Ticket, bullet_tokens, query_tokens  # noqa: E402

DEFAULT = ROOT.parent / "shared" / "datasets" / "apache-jira-dev.jsonl.gz"


def load(path: Path) -> list[dict[str, Any]]:
    """The issues, oldest first."""
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as lines:
        rows = [json.loads(line) for line in lines if line.strip()]
    return sorted(rows, key=lambda row: (row["created"], row["key"]))


def duplicate_pairs(rows: list[dict[str, Any]]) -> list[tuple[int, int]]:
    """(older, newer) positions of every Duplicate link with both ends in the file, once each."""
    position = {row["key"]: i for i, row in enumerate(rows)}
    pairs = set()
    for i, row in enumerate(rows):
        for link in row.get("links") or []:
            other = position.get(link.get("key"))
            if link.get("type") == "Duplicate" and other is not None and other != i:
                pairs.add((min(i, other), max(i, other)))
    return sorted(pairs)


def lesson_text(row: dict[str, Any]) -> str:
    """A lesson made from an issue: its summary and the start of its description."""
    return f"{row['summary']}\n{(row.get('description') or '')[:DESCRIPTION_CHARS]}"


def ticket(row: dict[str, Any]) -> Ticket:
    """The issue as a ticket (labels and components together)."""
    return Ticket(
        key=row["key"],
        summary=row["summary"] or "",
        description=row.get("description"),
        labels=tuple((row.get("labels") or []) + (row.get("components") or [])),
        scope=row["project"],
    )


def score(ranks: list[int | None]) -> tuple[float, float]:
    """Recall@5 and MRR@10 of the right answer's ranks (None = not found)."""
    recall = sum(1 for r in ranks if r is not None and r <= 5) / len(ranks)
    mrr = sum(1 / r for r in ranks if r is not None and r <= 10) / len(ranks)
    return recall, mrr


def ours(
    rows: list[dict[str, Any]], pairs: list[tuple[int, int]], scoped: bool
) -> list[int | None]:
    """Ranks with the product's tokenizer, query synthesis and incremental index."""
    wanted: dict[int, list[int]] = {}
    for older, newer in pairs:
        wanted.setdefault(newer, []).append(older)
    index = BM25Index()
    ranks: list[int | None] = []
    for i, row in enumerate(rows):
        for older in wanted.get(i, []):
            scopes = {row["project"], "global"} if scoped else None
            hits = index.search(query_tokens(ticket(row)), k=10, scopes=scopes)
            found = [n for n, (doc, _) in enumerate(hits, start=1) if doc == rows[older]["key"]]
            ranks.append(found[0] if found else None)
        tags = (row.get("labels") or []) + (row.get("components") or [])
        index.add(row["key"], bullet_tokens(lesson_text(row), tags), scope=row["project"])
    return ranks


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
    path = Path(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT
    rows = load(path)
    pairs = duplicate_pairs(rows)
    print(f"{path.name}: {len(rows)} issues, {len(pairs)} duplicate pairs")
    results = {}
    for name, run in (
        ("rank_bm25, \\w+ tokens (baseline)", lambda: baseline(rows, pairs)),
        ("playbook, all projects", lambda: ours(rows, pairs, scoped=False)),
        ("playbook, ticket's scope + global", lambda: ours(rows, pairs, scoped=True)),
    ):
        started = time.perf_counter()
        recall, mrr = score(run())
        results[name] = (recall, mrr)
        took = time.perf_counter() - started
        print(f"  {name:<36} Recall@5 {recall:.3f}  MRR@10 {mrr:.3f}  ({took:.1f} s)")
    recall, mrr = results["playbook, ticket's scope + global"]
    base_recall, base_mrr = results["rank_bm25, \\w+ tokens (baseline)"]
    print(
        json.dumps(
            {
                "pairs": len(pairs),
                "recall@5": round(recall, 3),
                "mrr@10": round(mrr, 3),
                "baseline_recall@5": round(base_recall, 3),
                "baseline_mrr@10": round(base_mrr, 3),
            }
        )
    )


if __name__ == "__main__":
    main()

"""Gaps: do the groups of tickets without a lesson match the dataset's duplicate links?

Usage: python bench/gaps.py [DATASET] [--generated] [--seed N] [--thresholds 0.25,0.35]

The dataset is ../shared/datasets/apache-jira-dev.jsonl.gz when present, else issues generated
in its shape (see bench/datasets.py); stderr and the JSON line say which.

The playbook is taken as empty, so every issue is a ticket that got no lesson, and all of them
are grouped at once (a window as long as the dataset) with the product's grouping
(`playbook.gaps.grouping`) over the text a search keeps (`retrieval.searched_text`). For each
threshold: pair recall (`Duplicate` pairs with both ends in one group, over all such pairs),
pair precision (duplicate pairs over all pairs sharing a group: a floor, since most similar
issues are not linked as duplicates), the largest group and how many issues are in a group of
two or more (a giant group would make recall meaningless). Time per 1,000 issues at the
default threshold, beside the time to tokenize the same issues, measured in the same run.
Last, the same recall within 7- and 30-day windows of creation, as the command groups a window.
Ends with one JSON line.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import datasets  # noqa: E402
from datasets import duplicate_pairs, ticket  # noqa: E402

from playbook.gaps import grouping  # noqa: E402
from playbook.search import text  # noqa: E402
from playbook.search.retrieval import searched_text  # noqa: E402

THRESHOLDS = (0.2, 0.25, 0.3, 0.35, 0.4, 0.5, 0.6)


def cold() -> None:
    """Empty the tokenizer's caches, so each timed run splits and stems every word itself."""
    text._identifier_tokens.cache_clear()
    text._stem.cache_clear()


def documents(rows: list[dict]) -> list[grouping.Document]:
    """Each issue as the search log keeps it: its summary and the text searched."""
    found = []
    for row in rows:
        searched = ticket(row)
        found.append(grouping.Document(row["key"], searched.summary, searched_text(searched)))
    return found


def measure(
    docs: list[grouping.Document], pairs: list[tuple[int, int]], threshold: float
) -> tuple[dict, float]:
    """The quality of the grouping at ``threshold``, and the seconds it took."""
    started = time.perf_counter()
    result = grouping.group(docs, threshold=threshold)
    seconds = time.perf_counter() - started
    group_of = {}
    for number, positions in enumerate(result.groups):
        for position in positions:
            group_of[position] = number
    sizes = sorted((len(g) for g in result.groups), reverse=True)
    together = sum(1 for a, b in pairs if group_of[a] == group_of[b])
    co_grouped = sum(size * (size - 1) // 2 for size in sizes)
    histogram = Counter(
        "1" if s == 1 else "2" if s == 2 else "3-5" if s <= 5 else "6-20" if s <= 20 else ">20"
        for s in sizes
    )
    return {
        "threshold": threshold,
        "pair_recall": round(together / len(pairs), 3) if pairs else None,
        "pair_precision": round(together / co_grouped, 4) if co_grouped else None,
        "largest_group": sizes[0] if sizes else 0,
        "grouped_tickets": sum(s for s in sizes if s > 1),
        "groups_of_3_or_more": sum(1 for s in sizes if s >= 3),
        "group_sizes": dict(sorted(histogram.items())),
        "seconds": round(seconds, 2),
    }, seconds


def windowed(
    rows: list[dict], docs: list[grouping.Document], pairs: list[tuple[int, int]], days: int
) -> dict:
    """Recall within windows of ``days`` by creation (as `playbook-bot gaps --days` groups):
    duplicate pairs created in one window found in one group, over such pairs."""
    window = [datetime.fromisoformat(row["created"][:10]).toordinal() // days for row in rows]
    together = within = largest = 0
    for number in sorted(set(window)):
        positions = [i for i, w in enumerate(window) if w == number]
        result = grouping.group([docs[i] for i in positions])
        group_of = {positions[p]: g for g, members in enumerate(result.groups) for p in members}
        largest = max(largest, *(len(members) for members in result.groups))
        for a, b in pairs:
            if a in group_of and b in group_of:
                within += 1
                together += group_of[a] == group_of[b]
    return {
        "days": days,
        "pairs_within_a_window": within,
        "pair_recall": round(together / within, 3) if within else None,
        "largest_group": largest,
    }


def main() -> None:
    """Run every threshold, print a table, end with one JSON line."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    datasets.add_arguments(parser, positional=True)
    parser.add_argument(
        "--thresholds",
        default=",".join(str(t) for t in THRESHOLDS),
        help="comma-separated cosine thresholds",
    )
    args = parser.parse_args()
    dataset = datasets.from_arguments(args)
    rows = dataset.rows
    pairs = duplicate_pairs(rows)
    docs = documents(rows)
    thresholds = sorted({float(t) for t in args.thresholds.split(",") if t.strip()})
    print(f"{dataset.name}: {len(rows)} issues, {len(pairs)} duplicate pairs")

    # The baseline, in the same run: tokenizing the same texts (the tokenizer's caches cold).
    cold()
    started = time.perf_counter()
    for doc in docs:
        grouping.tokens_of(doc)
    tokenize_seconds = time.perf_counter() - started

    results = []
    for threshold in thresholds:
        cold()
        result, _ = measure(docs, pairs, threshold)
        results.append(result)
        print(
            f"  threshold {threshold:.2f}: pair recall {result['pair_recall']}, "
            f"precision {result['pair_precision']}, largest group {result['largest_group']}, "
            f"{result['grouped_tickets']} issues grouped, "
            f"{result['groups_of_3_or_more']} groups of 3+, sizes {result['group_sizes']} "
            f"({result['seconds']} s)"
        )
    cold()
    _, default_seconds = measure(docs, pairs, grouping.THRESHOLD)
    per_thousand = 1000 * default_seconds / len(docs)
    baseline = 1000 * tokenize_seconds / len(docs)
    print(
        f"  grouping at the default {grouping.THRESHOLD}: {per_thousand:.3f} s per 1,000 issues; "
        f"tokenizing alone {baseline:.3f} s per 1,000"
    )
    windows = [windowed(rows, docs, pairs, days) for days in (7, 30)]
    for found in windows:
        print(
            f"  in {found['days']}-day windows at the default: pair recall "
            f"{found['pair_recall']} of {found['pairs_within_a_window']} pairs, "
            f"largest group {found['largest_group']}"
        )
    print(
        json.dumps(
            {
                "bench": "gaps",
                "dataset": dataset.describe(),
                "duplicate_pairs": len(pairs),
                "default_threshold": grouping.THRESHOLD,
                "thresholds": results,
                "seconds_per_1000": round(per_thousand, 3),
                "tokenize_seconds_per_1000": round(baseline, 3),
                "windows": windows,
            }
        )
    )


if __name__ == "__main__":
    main()

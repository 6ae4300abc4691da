"""Where "similar" should start: word overlap of duplicate Jira summaries against unrelated ones.

Usage: python bench/similar_threshold.py [DATASET] [--generated] [--seed N] [--negatives N]

The dataset is ../shared/datasets/apache-jira-dev.jsonl.gz when present, else issues generated
in its shape (see bench/datasets.py); stderr and the JSON line say which.

`add`, `propose_lesson` and POST /api/v1/lessons name a live lesson in ``similar_to`` when the
new text shares at least `lifecycle.SIMILAR_OVERLAP` of its words with it (`word_overlap`, the
rule that finds near-duplicates at `DUPLICATE_OVERLAP`). Two summaries of the same problem, as
two reporters wrote them, stand for a lesson and the one that should supersede it: the
summaries of every `Duplicate` pair with both ends in the file are the positives. Unrelated
pairs are summaries of two issues of the same project drawn at random (``--negatives`` for each
positive), as an add compares lessons of one scope. An add only sees the lessons most like
its text, so the harder test is the nearest unrelated summary: for ``--nearest`` issues drawn
at random, the summary of their project that overlaps theirs most without a Duplicate link.
For each threshold from 0.3 to 0.8 the bench reports recall (duplicates caught), the share of
random and of nearest unrelated pairs flagged, and precision at the sampled ratio. Ends with
one JSON line.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import datasets  # noqa: E402
from datasets import duplicate_pairs  # noqa: E402

from playbook.lessons.lifecycle import (  # noqa: E402
    DUPLICATE_OVERLAP,
    SIMILAR_OVERLAP,
    overlap_words,
    word_overlap,
)

THRESHOLDS = (0.3, 0.35, 0.4, 0.45, 0.5, 0.55, 0.6, 0.65, 0.7, 0.75, 0.8)


def unrelated_pairs(
    rows: list[dict[str, Any]], linked: set[tuple[int, int]], count: int, seed: int
) -> list[tuple[int, int]]:
    """``count`` random pairs of distinct issues of one project that no Duplicate link joins."""
    by_project: dict[str, list[int]] = defaultdict(list)
    for position, row in enumerate(rows):
        by_project[row["project"]].append(position)
    projects = [p for p, members in sorted(by_project.items()) if len(members) > 1]
    weights = [len(by_project[p]) for p in projects]
    chooser = random.Random(seed)
    found: set[tuple[int, int]] = set()
    while len(found) < count:
        project = chooser.choices(projects, weights)[0]
        a, b = chooser.sample(by_project[project], 2)
        pair = (min(a, b), max(a, b))
        if pair not in linked:
            found.add(pair)
    return sorted(found)


def nearest_unrelated(
    rows: list[dict[str, Any]], linked: set[tuple[int, int]], count: int, seed: int
) -> list[float]:
    """For ``count`` random issues, the highest overlap with an unlinked one of its project."""
    words = [overlap_words(row["summary"] or "") for row in rows]
    by_project: dict[str, list[int]] = defaultdict(list)
    for position, row in enumerate(rows):
        by_project[row["project"]].append(position)
    chooser = random.Random(seed + 1)
    best = []
    for probe in chooser.sample(range(len(rows)), min(count, len(rows))):
        mine, top = words[probe], 0.0
        for other in by_project[rows[probe]["project"]]:
            pair = (min(probe, other), max(probe, other))
            if other == probe or pair in linked or not mine or not words[other]:
                continue
            shared = len(mine & words[other]) / max(len(mine), len(words[other]))
            top = max(top, shared)
        best.append(top)
    return best


def measure(
    rows: list[dict[str, Any]], negatives_per_positive: int, nearest: int, seed: int
) -> dict[str, Any]:
    """Recall, false-alarm rates and precision of "overlap >= t" for each threshold."""
    positives = duplicate_pairs(rows)
    linked = set(positives)
    negatives = unrelated_pairs(rows, linked, len(positives) * negatives_per_positive, seed)

    def overlap(pair: tuple[int, int]) -> float:
        return word_overlap(rows[pair[0]]["summary"] or "", rows[pair[1]]["summary"] or "")

    same = [overlap(pair) for pair in positives]
    other = [overlap(pair) for pair in negatives]
    closest = nearest_unrelated(rows, linked, nearest, seed)
    table = []
    for threshold in THRESHOLDS:
        caught = sum(value >= threshold for value in same)
        alarms = sum(value >= threshold for value in other)
        near_alarms = sum(value >= threshold for value in closest)
        table.append(
            {
                "threshold": threshold,
                "duplicates_flagged": caught,
                "unrelated_flagged": alarms,
                "recall": round(caught / len(same), 3) if same else None,
                "false_alarm_rate": round(alarms / len(other), 4) if other else None,
                "nearest_unrelated_flagged": round(near_alarms / len(closest), 3)
                if closest
                else None,
                "precision": round(caught / (caught + alarms), 3) if caught + alarms else None,
                # Of the duplicates caught, those a near-duplicate check would already stop.
                "near_duplicates": sum(value >= DUPLICATE_OVERLAP for value in same),
            }
        )
    return {
        "positives": len(positives),
        "negatives": len(negatives),
        "median_overlap_duplicates": _median(same),
        "median_overlap_unrelated": _median(other),
        "nearest": len(closest),
        "median_overlap_nearest_unrelated": _median(closest),
        "thresholds": table,
    }


def _median(values: list[float]) -> float | None:
    ordered = sorted(values)
    if not ordered:
        return None
    middle = len(ordered) // 2
    if len(ordered) % 2:
        return round(ordered[middle], 3)
    return round((ordered[middle - 1] + ordered[middle]) / 2, 3)


def main() -> None:
    """Measure, print a table on stderr and one JSON line on stdout."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    datasets.add_arguments(parser, positional=True)
    parser.add_argument(
        "--negatives", type=int, default=20, help="unrelated pairs per duplicate pair"
    )
    parser.add_argument(
        "--nearest", type=int, default=1000, help="issues whose nearest unrelated one is found"
    )
    args = parser.parse_args()
    dataset = datasets.from_arguments(args)
    result = measure(dataset.rows, args.negatives, args.nearest, args.seed)
    print(
        f"{result['positives']} duplicate pairs, {result['negatives']} unrelated pairs "
        f"(median overlap {result['median_overlap_duplicates']} vs "
        f"{result['median_overlap_unrelated']}, nearest unrelated "
        f"{result['median_overlap_nearest_unrelated']}); in use: {SIMILAR_OVERLAP}",
        file=sys.stderr,
    )
    print("threshold  recall  random flagged  precision  nearest flagged", file=sys.stderr)
    for row in result["thresholds"]:
        print(
            f"{row['threshold']:>9}  {row['recall']:>6}  {row['false_alarm_rate']:>14}  "
            f"{row['precision']!s:>9}  {row['nearest_unrelated_flagged']:>15}",
            file=sys.stderr,
        )
    print(
        json.dumps(
            {
                "bench": "similar_threshold",
                "dataset": dataset.describe(),
                "similar_overlap": SIMILAR_OVERLAP,
                "negatives_per_positive": args.negatives,
                **result,
            }
        )
    )


if __name__ == "__main__":
    main()

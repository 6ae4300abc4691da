"""Bench datasets: the shared Apache Jira file when it is there, else a generated look-alike.

Benches run from a clean clone, where `../shared/datasets` (beside the repository) may not
exist. `open_dataset` then generates issues in the same shape (keys, projects, components,
labels, resolutions, `Duplicate` links), deterministically from a seed, and every bench says on
stderr and in its JSON line which one it used.

The generated issues read like engineering tickets: summaries built from templates over
exception, class and method names and symptoms, descriptions with prose, stack traces, log
lines and Jira markup, all drawn from a vocabulary with Zipf-like word frequencies (a few words
everywhere, a long tail of rare ones) and per-component topics, so BM25 sees realistic document
frequencies. About 3% of the issues are duplicates of an earlier one, reworded the way a second
reporter would describe the same failure.
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from generated_issues import SEED, generate

from playbook.search.text import DESCRIPTION_CHARS, Ticket

ROOT = Path(__file__).resolve().parents[1]
DEFAULT = ROOT.parent / "shared" / "datasets" / "apache-jira-dev.jsonl.gz"
GENERATED_ISSUES = 8000


@dataclass(frozen=True)
class Dataset:
    """Issues oldest first, and where they came from."""

    rows: list[dict[str, Any]]
    name: str
    generated: bool
    seed: int | None = None

    def describe(self) -> dict[str, Any]:
        """The dataset as the JSON line of a bench reports it."""
        return {
            "name": self.name,
            "generated": self.generated,
            "issues": len(self.rows),
            "seed": self.seed,
        }


def load(path: Path) -> list[dict[str, Any]]:
    """The issues of a JSON-lines file (gzip or plain), oldest first."""
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as lines:
        rows = [json.loads(line) for line in lines if line.strip()]
    return sorted(rows, key=lambda row: (row["created"], row["key"]))


def add_arguments(parser: argparse.ArgumentParser, positional: bool = False) -> None:
    """The dataset options every bench takes: a file, or `--generated` to force generation."""
    if positional:
        parser.add_argument("dataset", nargs="?", type=Path, default=None, help="JSONL(.gz) file")
    else:
        parser.add_argument("--dataset", type=Path, default=None, help="JSONL(.gz) file")
    parser.add_argument(
        "--generated",
        action="store_true",
        help="use the generated dataset even when the shared one is present",
    )
    parser.add_argument("--seed", type=int, default=SEED, help="seed of the generated dataset")


def from_arguments(args: argparse.Namespace) -> Dataset:
    """The dataset the options ask for, announced on stderr."""
    return open_dataset(args.dataset, generated=args.generated, seed=args.seed)


def open_dataset(
    path: Path | None = None,
    *,
    generated: bool = False,
    issues: int = GENERATED_ISSUES,
    seed: int = SEED,
) -> Dataset:
    """A file given by name, else the shared file when present, else generated issues.

    A file named explicitly must exist (a typo should not silently bench something else).
    """
    why = "asked for with --generated"
    if not generated:
        if path is not None:
            dataset = Dataset(load(path), path.name, generated=False)
            announce(dataset)
            return dataset
        if DEFAULT.exists():
            dataset = Dataset(load(DEFAULT), DEFAULT.name, generated=False)
            announce(dataset)
            return dataset
        why = f"../shared/datasets/{DEFAULT.name} not found"
    dataset = Dataset(generate(issues, seed=seed), "generated", generated=True, seed=seed)
    announce(dataset, why)
    return dataset


def announce(dataset: Dataset, why: str = "") -> None:
    """One line on stderr saying which dataset a bench runs on."""
    if dataset.generated:
        print(
            f"dataset: generated, {len(dataset.rows):,} synthetic issues, seed {dataset.seed}"
            f" ({why})",
            file=sys.stderr,
        )
    else:
        print(f"dataset: {dataset.name}, {len(dataset.rows):,} issues", file=sys.stderr)


def linked(rows: list[dict[str, Any]]) -> set[frozenset[str]]:
    """Every pair of keys Jira links, in either direction, any link type."""
    pairs = set()
    for row in rows:
        for link in row.get("links") or []:
            if link.get("key") and link["key"] != row["key"]:
                pairs.add(frozenset((row["key"], link["key"])))
    return pairs


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


def tags(row: dict[str, Any]) -> list[str]:
    """An issue's labels and components, which retrieval treats alike."""
    return (row.get("labels") or []) + (row.get("components") or [])


def lesson(row: dict[str, Any], source: str) -> dict[str, Any]:
    """The issue as the lesson learned from it, in the shape ``bulk.put`` takes."""
    return {
        "id": row["key"],
        "text": lesson_text(row),
        "tags": tags(row),
        "scope": row["project"],
        "learned_from": row["key"],
        "section": "error_resolution",
        "source": source,
        "status": "active",
    }


def ticket(row: dict[str, Any], scope: str | None = None) -> Ticket:
    """The issue as a ticket (labels and components together), in its project or ``scope``."""
    return Ticket(
        key=row["key"],
        summary=row["summary"] or "",
        description=row.get("description"),
        labels=tuple(tags(row)),
        scope=scope or row["project"],
    )

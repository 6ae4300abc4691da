"""Secrets: how often ordinary ticket text is taken for a credential, and what a scan costs.

Usage: python bench/secret_scan.py [DATASET] [--generated] [--seed N] [--show 20]

The dataset is ../shared/datasets/apache-jira-dev.jsonl.gz when present, else issues generated
in its shape (see bench/datasets.py); stderr and the JSON line say which.

Each issue's summary and description, cut to the default longest lesson (2,000 characters),
is scanned as if it were a lesson's text (`playbook.lessons.secrets.find`), and then the whole
description as well. An issue counts once however many findings it has. Issues hold pasted
configuration and logs, so some findings are real demo credentials (``admin:admin@`` in a URL);
the findings are listed by kind with where they are, never with the value, for a reader to
judge. Time per 1,000 texts at 2,000 characters. Ends with one JSON line.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import datasets  # noqa: E402

from playbook.lessons import fields, secrets  # noqa: E402


def text_of(row: dict, limit: int | None) -> str:
    """The issue as a lesson's text would be: summary, then description, maybe cut."""
    text = f"{row.get('summary') or ''}\n{row.get('description') or ''}"
    return text[:limit] if limit else text


def scan(rows: list[dict], limit: int | None) -> tuple[Counter, list[tuple[str, str]], float]:
    """Issues flagged per kind, (key, finding) for each flagged issue, and seconds taken."""
    kinds: Counter = Counter()
    flagged: list[tuple[str, str]] = []
    started = time.perf_counter()
    for row in rows:
        found = secrets.find(text_of(row, limit))
        if found:
            kinds.update({finding.kind for finding in found})
            flagged.append((row["key"], secrets.summary(found)))
    return kinds, flagged, time.perf_counter() - started


def main() -> None:
    """Scan the dataset at the lesson cap and whole; print the rates and one JSON line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    datasets.add_arguments(parser, positional=True)
    parser.add_argument("--show", type=int, default=20, help="flagged issues listed")
    args = parser.parse_args()
    dataset = datasets.from_arguments(args)
    rows = dataset.rows
    secrets.find("warm up: import the scanner before timing")
    report: dict = {"bench": "secret_scan", "dataset": dataset.describe()}
    for name, limit in (("lesson_cap", fields.MAX_LESSON_CHARS), ("whole", None)):
        kinds, flagged, seconds = scan(rows, limit)
        rate = len(flagged) / len(rows) if rows else 0.0
        print(f"{name}: {len(flagged)} of {len(rows)} issues flagged ({rate:.2%})")
        for kind, count in kinds.most_common():
            print(f"  {kind}: {count}")
        for key, finding in flagged[: args.show]:
            print(f"  {key}: {finding}")
        report[name] = {
            "flagged": len(flagged),
            "rate": round(rate, 5),
            "kinds": dict(kinds),
            "ms_per_1000": round(seconds * 1000 / max(len(rows), 1) * 1000, 1),
        }
    print(json.dumps(report))


if __name__ == "__main__":
    main()

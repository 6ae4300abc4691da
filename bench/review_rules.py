"""Reviews: how well the heuristic finds the rules in review feedback, and what it costs.

Usage: python bench/review_rules.py [--data tests/data/review_sentences.jsonl] [--show 20]

Each labelled item (a review comment: a sentence or a few, in GitHub Markdown) counts as
predicted a rule when `playbook.reviews.rules_in` finds at least one in it. Precision, recall and
F1 overall, per set and per style. The sets say when an item was written: `dev` before the
extractor was tuned on it, `holdout` before its second round of tuning (it was measured blind
once, see the README), `fresh` after the extractor was frozen; only `fresh` is untouched. Then
the time per 1,000 items and for hostile inputs at the 65,536-character cap. Ends with one JSON
line.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from playbook.reviews import prose, rules_in  # noqa: E402

DATA = ROOT / "tests" / "data" / "review_sentences.jsonl"
# Shapes that make Markdown parsers or sentence splitters slow when written carelessly.
HOSTILE = {
    "brackets": "[" * prose.FEEDBACK_CHARS,
    "links": "[a](" * (prose.FEEDBACK_CHARS // 4),
    "images": "![" * (prose.FEEDBACK_CHARS // 2),
    "emphasis": "*a" * (prose.FEEDBACK_CHARS // 2),
    "periods": "." * prose.FEEDBACK_CHARS,
    "sentences": "Always do x. " * (prose.FEEDBACK_CHARS // 13),
    "quotes": "> " * (prose.FEEDBACK_CHARS // 2),
    "comments": "<!--" * (prose.FEEDBACK_CHARS // 4),
    "mentions": "@a " * (prose.FEEDBACK_CHARS // 3),
    "one_word": "a" * prose.FEEDBACK_CHARS,
    "nested_lists": "  - " * (prose.FEEDBACK_CHARS // 4),
    "fences": "```\n" * (prose.FEEDBACK_CHARS // 4),
    "backticks": "`a" * (prose.FEEDBACK_CHARS // 2),
    "over_cap": "Never log the token. " * 20_000,
}


def score(hits: int, false_alarms: int, misses: int, right_nos: int) -> dict:
    """Precision, recall and F1 from counts; None where undefined (nothing claimed, no rules)."""
    claimed, rules = hits + false_alarms, hits + misses
    precision = hits / claimed if claimed else None
    recall = hits / rules if rules else None
    f1 = (
        2 * precision * recall / (precision + recall)
        if precision is not None and recall is not None and precision + recall
        else None
    )
    return {
        "items": claimed + misses + right_nos,
        "rules": rules,
        "false_alarms": false_alarms,
        "precision": None if precision is None else round(precision, 3),
        "recall": None if recall is None else round(recall, 3),
        "f1": None if f1 is None else round(f1, 3),
    }


def evaluate(rows: list[dict]) -> tuple[dict, list[tuple[str, dict]]]:
    """Scores overall, per set and per style, and the items the extractor got wrong."""
    counts: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0, 0])  # hit, false, miss, right-no
    wrong: list[tuple[str, dict]] = []
    for row in rows:
        found = bool(rules_in(row["text"]))
        outcome = (0 if row["rule"] else 1) if found else (2 if row["rule"] else 3)
        for group in ("all", f"set:{row.get('set', 'dev')}", f"style:{row['style']}"):
            counts[group][outcome] += 1
        if outcome in (1, 2):
            wrong.append(("false alarm" if outcome == 1 else "missed", row))
    return {group: score(*c) for group, c in sorted(counts.items())}, wrong


def _cell(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def main() -> None:
    """Score the labelled set, time the extractor, print a table and one JSON line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--show", type=int, default=20, help="wrong items listed")
    args = parser.parse_args()
    rows = [json.loads(line) for line in args.data.read_text().splitlines() if line.strip()]
    scores, wrong = evaluate(rows)
    print(f"{'group':26} {'items':>5} {'rules':>5} {'false':>5} {'P':>6} {'R':>6} {'F1':>6}")
    for group, s in scores.items():
        print(
            f"{group:26} {s['items']:>5} {s['rules']:>5} {s['false_alarms']:>5} "
            f"{_cell(s['precision']):>6} {_cell(s['recall']):>6} {_cell(s['f1']):>6}"
        )
    for kind, row in wrong[: args.show]:
        print(f"  {kind} [{row['style']}]: {row['text'][:100]!r}")
    started = time.perf_counter()
    for row in rows:
        rules_in(row["text"])
    per_1000 = (time.perf_counter() - started) * 1000 / len(rows) * 1000
    print(f"{per_1000:.1f} ms per 1,000 items")
    hostile = {}
    for name, text in HOSTILE.items():
        started = time.perf_counter()
        rules_in(text)
        hostile[name] = round((time.perf_counter() - started) * 1000, 1)
    print("hostile inputs (ms): " + ", ".join(f"{k} {v}" for k, v in hostile.items()))
    report = {
        "bench": "review_rules",
        "items": len(rows),
        "rules": sum(1 for row in rows if row["rule"]),
        "scores": scores,
        "ms_per_1000": round(per_1000, 1),
        "hostile_ms": hostile,
    }
    print(json.dumps(report))


if __name__ == "__main__":
    main()

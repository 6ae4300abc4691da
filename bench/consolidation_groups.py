"""Where consolidation groups should start: planted paraphrases against boilerplate look-alikes.

Usage: python bench/consolidation_groups.py [DATASET] [--generated] [--seed N] [--bigram W]

Two scopes are grouped by `playbook.consolidation.groups.find_groups` at each threshold, and
every pair of lessons put in one group is scored against the pairs planted together:

- **planted**: instructions made from parts (an action, an object, a condition, a why), each
  written two to four times the way different people would write the same lesson: clauses
  reordered, synonyms swapped, filler added or dropped, a different ticket named. The hard
  negatives are the other instructions: many share the action, the object or the condition
  of another, and every lesson carries one of a team's boilerplate sentences ("Always make
  sure the tests pass before you open the pull request.").
- **jira**: the summaries of one project of the dataset (the shared Apache Jira file when
  present, else generated issues, see bench/datasets.py), each with a team boilerplate sentence;
  the two ends of every `Duplicate` link are the pairs that should meet (two reporters' words
  for one problem, which is harder than a lesson reworded), every other pair should not.

Prints, per threshold, pair precision and recall on each scope, and the time to group the
largest scope; then the time to group --scale lessons of random words that all end with one
boilerplate sentence (what tests/playbook/consolidation/test_groups.py groups at 2,000, where
it only checks the work stays within the groups), beside the baseline of tokenizing the same
texts in the same run; ends with one JSON line.
"""

from __future__ import annotations

import argparse
import itertools
import json
import random
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import datasets  # noqa: E402
import machine  # noqa: E402
from datasets import duplicate_pairs  # noqa: E402

from playbook.consolidation.groups import BIGRAM_WEIGHT, THRESHOLD, find_groups, terms  # noqa: E402

THRESHOLDS = (0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.55, 0.6, 0.65, 0.7, 0.75, 0.8)

FILLERS = ["always", "also", "properly", "first", "again", "really"]
PREPOSITIONS = ("when", "after", "if", "with", "in", "on", "for", "during", "while", "before")
BOILERPLATE = [
    "Always make sure the tests pass before you open the pull request.",
    "Run the full test suite and update the changelog.",
    "Ask the on-call engineer if unsure.",
    "See the team wiki for details.",
]


def _reword(chooser: random.Random, summary: str) -> str:
    """``summary`` as another person would write it: reordered, a word dropped or added."""
    words = summary.split()
    cut = [i for i, w in enumerate(words) if i > 1 and w.lower() in PREPOSITIONS]
    if cut and chooser.random() < 0.5:  # "X fails when Y" -> "When Y, X fails"
        at = chooser.choice(cut)
        words = [*words[at:], "-", *words[:at]]
    for _ in range(chooser.randint(0, 2)):  # a word or two left out
        if len(words) > 4:
            words.pop(chooser.randrange(1, len(words)))
    for _ in range(chooser.randint(0, 2)):  # a word or two added
        words.insert(chooser.randrange(0, len(words) + 1), chooser.choice(FILLERS))
    return " ".join(words)


def _lesson(chooser: random.Random, summary: str) -> str:
    """A lesson of the team: the instruction, the ticket it came from, a boilerplate line."""
    ticket = f"(seen in {chooser.choice(['CTMS', 'OPS', 'PAY'])}-{chooser.randint(100, 9999)})"
    return f"{summary} {ticket}. {chooser.choice(BOILERPLATE)}"


def planted_scope(
    rows: list[dict[str, Any]], seed: int, instructions: int = 600
) -> tuple[list[str], set[frozenset[int]]]:
    """Lessons made from real summaries, two thirds of them written two to four times.

    The summaries are of one project (the one with most issues), so the other lessons share
    its vocabulary as well as the boilerplate: those are the hard negatives. Summaries with a
    Duplicate link, or repeating another word for word, are left out (their pairs are
    unlabelled duplicates).
    """
    chooser = random.Random(seed)
    linked = {i for pair in duplicate_pairs(rows) for i in pair}
    per_project: dict[str, int] = defaultdict(int)
    for row in rows:
        per_project[row["project"]] += 1
    project = max(sorted(per_project), key=lambda p: per_project[p])
    seen: set[str] = set()
    summaries = []
    for i, row in enumerate(rows):
        summary = " ".join((row.get("summary") or "").split())
        key = summary.lower()
        wanted = row["project"] == project and i not in linked and len(summary.split()) >= 5
        if wanted and key not in seen:
            seen.add(key)
            summaries.append(summary)
    texts: list[str] = []
    same: dict[int, list[int]] = defaultdict(list)
    for number, summary in enumerate(chooser.sample(summaries, instructions)):
        copies = 1 if number % 3 == 0 else chooser.randint(2, 4)
        for copy in range(copies):
            same[number].append(len(texts))
            worded = summary if copy == 0 else _reword(chooser, summary)
            texts.append(_lesson(chooser, worded))
    order = list(range(len(texts)))
    chooser.shuffle(order)
    where = {old: new for new, old in enumerate(order)}
    shuffled = [""] * len(texts)
    for old, text in enumerate(texts):
        shuffled[where[old]] = text
    positives = {
        frozenset((where[a], where[b]))
        for members in same.values()
        for a, b in itertools.combinations(members, 2)
    }
    return shuffled, positives


def jira_scope(rows: list[dict[str, Any]], seed: int) -> tuple[list[str], set[frozenset[int]]]:
    """The summaries of the project with most Duplicate links, each with a boilerplate line."""
    pairs = duplicate_pairs(rows)
    per_project: dict[str, int] = defaultdict(int)
    for a, _ in pairs:
        per_project[rows[a]["project"]] += 1
    project = max(sorted(per_project), key=lambda p: per_project[p])
    members = [i for i, row in enumerate(rows) if row["project"] == project][:2000]
    position = {row: n for n, row in enumerate(members)}
    chooser = random.Random(seed)
    texts = [f"{rows[i]['summary']}. {chooser.choice(BOILERPLATE)}" for i in members]
    positives = {
        frozenset((position[a], position[b])) for a, b in pairs if a in position and b in position
    }
    return texts, positives


def score(
    texts: list[str], positives: set[frozenset[int]], threshold: float, bigram: float
) -> dict[str, Any]:
    """Pair precision and recall of the groups found at ``threshold``."""
    lessons = [(f"pb-{n + 1}", text) for n, text in enumerate(texts)]
    started = time.perf_counter()
    groups = find_groups(lessons, threshold=threshold, bigram_weight=bigram)
    seconds = time.perf_counter() - started
    found = {
        frozenset((int(a[3:]) - 1, int(b[3:]) - 1))
        for group in groups
        for a, b in itertools.combinations(group.member_ids, 2)
    }
    hits = len(found & positives)
    return {
        "threshold": threshold,
        "groups": len(groups),
        "pairs_found": len(found),
        "precision": round(hits / len(found), 3) if found else None,
        "recall": round(hits / len(positives), 3) if positives else None,
        "seconds": round(seconds, 3),
    }


def scale(count: int, seed: int) -> dict[str, Any]:
    """Seconds to group ``count`` lessons of 12 random words and one boilerplate sentence,
    beside the seconds to tokenize the same texts (the baseline: grouping tokenizes them too)."""
    chooser = random.Random(seed)
    vocabulary = [f"word{n}" for n in range(3000)]
    texts = [f"{' '.join(chooser.sample(vocabulary, 12))} {BOILERPLATE[0]}" for _ in range(count)]
    started = time.perf_counter()
    for text in texts:
        terms(text)
    baseline = time.perf_counter() - started
    started = time.perf_counter()
    find_groups([(f"pb-{n}", text) for n, text in enumerate(texts, start=1)])
    seconds = time.perf_counter() - started
    return {
        "lessons": count,
        "seconds": round(seconds, 3),
        "tokenize_seconds": round(baseline, 3),
        "ratio": round(seconds / baseline, 1),
    }


def main() -> None:
    """Measure, print a table on stderr and one JSON line on stdout."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    datasets.add_arguments(parser, positional=True)
    parser.add_argument("--bigram", type=float, default=BIGRAM_WEIGHT, help="bigram weight")
    parser.add_argument("--scale", type=int, default=2000, help="random lessons grouped, timed")
    args = parser.parse_args()
    dataset = datasets.from_arguments(args)
    planted, planted_pairs = planted_scope(dataset.rows, args.seed)
    small, small_pairs = planted_scope(dataset.rows, args.seed + 1, instructions=30)
    jira, jira_pairs = jira_scope(dataset.rows, args.seed)
    print(
        f"planted: {len(planted)} lessons, {len(planted_pairs)} same-instruction pairs; "
        f"small: {len(small)} lessons, {len(small_pairs)} pairs; "
        f"jira: {len(jira)} summaries, {len(jira_pairs)} duplicate pairs; "
        f"bigram weight {args.bigram}; default threshold {THRESHOLD}",
        file=sys.stderr,
    )
    print(
        "threshold  planted P  planted R  small P  small R  jira R  jira pairs  seconds",
        file=sys.stderr,
    )
    table = []
    for threshold in THRESHOLDS:
        a = score(planted, planted_pairs, threshold, args.bigram)
        b = score(small, small_pairs, threshold, args.bigram)
        c = score(jira, jira_pairs, threshold, args.bigram)
        table.append({"threshold": threshold, "planted": a, "small": b, "jira": c})
        print(
            f"{threshold:>9}  {a['precision']!s:>9}  {a['recall']!s:>9}  {b['precision']!s:>7}"
            f"  {b['recall']!s:>7}  {c['recall']!s:>6}  {c['pairs_found']:>10}"
            f"  {c['seconds']:>7}",
            file=sys.stderr,
        )
    scaled = scale(args.scale, args.seed)
    print(
        f"{scaled['lessons']:,} random lessons grouped in {scaled['seconds']} s; tokenizing them "
        f"alone {scaled['tokenize_seconds']} s ({scaled['ratio']}x)",
        file=sys.stderr,
    )
    print(
        json.dumps(
            {
                "bench": "consolidation_groups",
                "dataset": dataset.describe(),
                "bigram_weight": args.bigram,
                "default_threshold": THRESHOLD,
                "planted": {"lessons": len(planted), "pairs": len(planted_pairs)},
                "small": {"lessons": len(small), "pairs": len(small_pairs)},
                "jira": {"lessons": len(jira), "pairs": len(jira_pairs)},
                "thresholds": table,
                "scale": scaled,
                "machine": machine.describe(None),
            }
        )
    )


if __name__ == "__main__":
    main()

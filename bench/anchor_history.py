"""Lessons anchored to code, on a real repository's history: how often flagged, how well found.

Usage: python bench/anchor_history.py [--history FILE] [--dataset FILE] [--generated]
       [--limit N] [--json]

The history is bench/data/zookeeper-history.jsonl.gz (apache/zookeeper's commits, 2007-2026:
dates, ticket keys and changed files; Apache-2.0; remade by bench/extract_history.py, whose
docstring has the command). The tickets are ../shared/datasets/apache-jira-dev.jsonl.gz when
present (bench/datasets.py), its tickets of the history's Jira project. ``--limit N`` replays
only the oldest N commits; the whole history takes about 25 minutes on 2 cores (some 240,000
flags and their weekly clears go through the database), ``--progress`` says how far it is.
The default, ``--rule written``, captures anchors by the bot's own rule
(`playbook.anchors.capture`, which leaves out lock files and changelogs by name);
``--rule quiet`` also leaves out the files most recent commits touch (bench/history.py's
`Busy`), to show what such a filter would buy.

Every commit naming a ticket makes that ticket's lesson, anchored to the change's files by
the bot's capture rule (bench/history.py); every later commit that modifies, renames or
deletes an anchored file flags it through the bot's own `stale.flag`; a maintainer lists and
clears the flags once a week (bench/anchor_replay.py). Reported:

- staleness: the share of anchored lessons touched again within 30 and 90 days (by any commit,
  and by another ticket's), the flagged lessons a team lists per week (median, p90, max; over
  the whole history and the last 3 years), and how many would be flagged at once if nobody
  cleared them; renames followed, lessons whose every file went, anchors that name nothing at
  the end;
- path matching: the share of the project's tickets naming a path as
  `matching.named_in(ticket_text(...))` reads them, and how many name code the Java way (stack
  frames `(ClientCnxn.java:1063)`, classes `org.apache.zookeeper.ClientCnxn`); for tickets whose
  fix touched files earlier lessons are anchored to, where the first such lesson ranks when the
  ticket is searched at its creation, with anchors and without (the lift), and how precise the
  lessons the anchors raised are.
"""

from __future__ import annotations

import argparse
import json
import re
import shlex
import statistics
import sys
import time
from collections import Counter
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import anchor_replay  # noqa: E402
import datasets  # noqa: E402
import history  # noqa: E402
import machine  # noqa: E402
from anchor_replay import Replay, fixes, week_of  # noqa: E402

from playbook.anchors.matching import named_in, ticket_text  # noqa: E402

WINDOWS = (30, 90)
RECENT_DAYS = 3 * 365
# A Java stack frame's file, `(ClientCnxn.java:1063)`, and a qualified class name,
# `org.apache.zookeeper.ClientCnxn`: possessive, one pass, no backtracking.
_FRAME = re.compile(r"\(([A-Za-z_$][\w$]*+)\.java:[0-9]++\)")
_CLASS = re.compile(r"\b[a-z][a-z0-9_]*+(?:\.[a-z][a-z0-9_]*+)++\.([A-Z][\w$]*+)")


def spread(values: Sequence[float]) -> dict[str, float | int]:
    """Median, p90, max and mean of ``values`` (zeros when there are none)."""
    if not values:
        return {"weeks": 0, "median": 0, "p90": 0, "max": 0, "mean": 0.0}
    ordered = sorted(values)
    return {
        "weeks": len(ordered),
        "median": statistics.median(ordered),
        "p90": ordered[min(len(ordered) - 1, int(0.9 * len(ordered)))],
        "max": ordered[-1],
        "mean": round(statistics.fmean(ordered), 2),
    }


def share(part: int, whole: int) -> float | None:
    """``part / whole`` to 4 places; None of nothing."""
    return round(part / whole, 4) if whole else None


def staleness(run: Replay, commits: list[history.Commit]) -> dict[str, Any]:
    """Touched again, flags per week, the backlog nobody clears, renames, gone files."""
    end = commits[-1].at
    lessons = list(run.lessons.values())
    anchored = [lesson for lesson in lessons if lesson.anchors]
    first: dict[str, datetime] = {}
    first_other: dict[str, datetime] = {}
    for event in sorted(run.flags, key=lambda e: e.at):
        first.setdefault(event.lesson, event.at)
        if not event.same_ticket:
            first_other.setdefault(event.lesson, event.at)
    touched: dict[str, Any] = {}
    for days in WINDOWS:
        window = timedelta(days=days)
        eligible = [lesson for lesson in anchored if lesson.at <= end - window]
        counts = {
            name: sum(
                1
                for lesson in eligible
                if lesson.key in by and by[lesson.key] - lesson.at <= window
            )
            for name, by in (("any commit", first), ("another ticket's commit", first_other))
        }
        touched[f"{days} days"] = {
            "lessons": len(eligible),
            **{name: share(n, len(eligible)) for name, n in counts.items()},
        }
    listed = {week.start: week.listed for week in run.weeks}
    weekly: list[tuple[datetime, int]] = []
    if anchored:
        at, last = week_of(min(lesson.at for lesson in anchored)), week_of(end)
        while at <= last:
            weekly.append((at, listed.get(at, 0)))
            at += timedelta(days=7)
    recent = week_of(end - timedelta(days=RECENT_DAYS))
    ever = {event.lesson for event in run.flags}
    ever_recent = {event.lesson for event in run.flags if event.at >= end - timedelta(RECENT_DAYS)}
    live = history.live_files(commits)
    folders = history.folders_of(live)
    nowhere = [
        key
        for key, anchors in run.anchors.items()
        if anchors and not any(a in live or a in folders for a in anchors)
    ]
    return {
        "lessons": len(lessons),
        "anchored": len(anchored),
        "by_rule": dict(Counter(lesson.kind for lesson in lessons)),
        "touched_again": touched,
        "by_anchor_kind": by_kind(run, anchored, first, end),
        "flags": len(run.flags),
        "flags_by_same_ticket": sum(1 for e in run.flags if e.same_ticket),
        "listed_per_week": {
            "whole history": spread([n for _, n in weekly]),
            "last 3 years": spread([n for at, n in weekly if at >= recent]),
        },
        "flagged_if_never_cleared": {
            "at the end": len(ever),
            "share of anchored": share(len(ever), len(anchored)),
            "flagged in the last 3 years": len(ever_recent),
        },
        "renames_followed": sum(1 for e in run.flags if e.followed),
        "every_file_gone": len({e.lesson for e in run.flags if e.gone}),
        "anchors_naming_nothing_at_the_end": len(nowhere),
        "rule": "written" if run.busy is None else "quiet",
        "busy_files_left_out": dict(run.busy.left_out.most_common(5)) if run.busy else {},
        "refused": run.refused,
    }


def by_kind(
    run: Replay, anchored: list[Any], first: dict[str, datetime], end: datetime
) -> dict[str, Any]:
    """Per branch of the capture rule: lessons, touched within 30 days, flags per lesson-year."""
    flags = Counter(event.lesson for event in run.flags)
    out: dict[str, Any] = {}
    for kind in sorted({lesson.kind for lesson in anchored}):
        group = [lesson for lesson in anchored if lesson.kind == kind]
        month = [lesson for lesson in group if lesson.at <= end - timedelta(days=30)]
        soon = sum(
            1
            for lesson in month
            if lesson.key in first and first[lesson.key] - lesson.at <= timedelta(days=30)
        )
        years = sum(max((end - lesson.at).days, 1) for lesson in group) / 365.25
        out[kind] = {
            "lessons": len(group),
            "touched within 30 days": share(soon, len(month)),
            "flags per lesson-year": round(sum(flags[lesson.key] for lesson in group) / years, 2),
        }
    return out


def naming(rows: list[dict[str, Any]], commits: list[history.Commit]) -> dict[str, Any]:
    """How the project's tickets name code: paths as the matcher reads them, Java's ways."""
    tails = {tail for c in commits for path in c.paths() for tail in history.tails(path)}
    counts: Counter[str] = Counter()
    for row in rows:
        text = ticket_text(row.get("summary") or "", row.get("description"))
        named = named_in(text)
        counts["paths"] += bool(named.paths)
        counts["paths with a folder"] += any("/" in path for path in named.paths)
        counts["a repository file"] += any(path in tails for path in named.paths)
        counts["a repository file with its folder"] += any(
            "/" in path and path in tails for path in named.paths
        )
        counts["symbols"] += bool(named.symbols)
        counts["stack frames"] += bool(_FRAME.search(text))
        counts["qualified classes"] += bool(_CLASS.search(text))
        counts["frames or classes, no path"] += bool(
            not named.paths and (_FRAME.search(text) or _CLASS.search(text))
        )
    return {"tickets": len(rows), **{name: share(n, len(rows)) for name, n in counts.items()}}


def names_fix_file(row: dict[str, Any], fix: set[str]) -> bool:
    """Whether the ticket names, by file or class name, a file its fix touched."""
    text = ticket_text(row.get("summary") or "", row.get("description"))
    names = {path.rpartition("/")[2] for path in named_in(text).paths}
    names.update(f"{m.group(1)}.java" for m in _FRAME.finditer(text))
    names.update(f"{m.group(1).split('$')[0]}.java" for m in _CLASS.finditer(text))
    return bool(names & {path.rpartition("/")[2] for path in fix})


SENSES = {
    # A right lesson is an earlier one anchored to a file the ticket's fix touched ...
    "by file or folder": ("right", "with_anchors", "without", "anchored_right"),
    # ... by the file's own name (the lesson about the file the ticket names).
    "by file": ("right_files", "files_with_anchors", "files_without", "anchored_right_files"),
}


def precision(
    run: Replay, tickets: dict[str, dict[str, Any]], commits: list[history.Commit]
) -> dict[str, Any]:
    """Where the right lesson ranks with anchors and without, on all tickets and by naming."""
    fixed = fixes(commits)
    searched = run.searched
    path_keys = {
        s.key
        for s in searched
        if named_in(
            ticket_text(tickets[s.key].get("summary") or "", tickets[s.key].get("description"))
        ).paths
    }
    fix_keys = {s.key for s in searched if names_fix_file(tickets[s.key], fixed[s.key])}
    raised = sum(s.anchored_hits for s in searched)
    out: dict[str, Any] = {
        "searched": len(searched),
        "anchored_hits": raised,
        "tickets_with_an_anchored_hit": sum(1 for s in searched if s.anchored_hits),
        "senses": {},
    }
    for sense, (count, with_anchors, without, hits_right) in SENSES.items():
        eligible = [s for s in searched if getattr(s, count)]
        groups = {
            "every ticket with a right lesson": eligible,
            "naming a path (as the matcher reads it)": [s for s in eligible if s.key in path_keys],
            "naming a file its fix touched (file or class name)": [
                s for s in eligible if s.key in fix_keys
            ],
        }
        out["senses"][sense] = {
            "tickets": len(eligible),
            "ranks": {
                name: ranks_of(group, with_anchors, without) for name, group in groups.items()
            },
            "anchored_hits_right": share(sum(getattr(s, hits_right) for s in searched), raised),
        }
    return out


def ranks_of(group: list[anchor_replay.Searched], *ways: str) -> dict[str, Any]:
    """First, top 3 and top K shares of the first right lesson, with anchors and without."""
    out: dict[str, Any] = {"tickets": len(group)}
    for way, name in zip(ways, ("with_anchors", "without"), strict=True):
        found = [getattr(s, way) for s in group]
        out[name] = {
            f"top {n}": share(sum(1 for r in found if r is not None and r <= n), len(group))
            for n in (1, 3, anchor_replay.K)
        }
    return out


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Replay, measure, print (markdown, or with --json one JSON document); returns the report."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--history", type=Path, default=history.DEFAULT, help="the extract")
    datasets.add_arguments(parser)
    parser.add_argument("--limit", type=int, default=None, help="only the oldest N commits")
    parser.add_argument("--json", action="store_true", help="one JSON document, no table")
    parser.add_argument("--progress", action="store_true", help="a line on stderr now and then")
    parser.add_argument(
        "--rule",
        choices=("quiet", "written"),
        default="written",
        help="capture by the bot's rule (written, the default), or leaving out busy files (quiet)",
    )
    args = parser.parse_args(argv)
    if args.limit is not None and args.limit < 1:
        parser.error("--limit must be at least 1")
    try:
        meta, commits = history.load(args.history)
    except (OSError, history.BadHistory) as error:
        parser.error(f"--history: {error}")
    commits = commits[: args.limit] if args.limit else commits
    if not commits:
        parser.error("--history: no commits in the extract")
    project = project_of(commits)
    dataset = datasets.from_arguments(args)
    rows = [row for row in dataset.rows if row.get("project") == project]
    tickets = {row["key"]: row for row in rows}
    command = "python bench/anchor_history.py " + shlex.join(sys.argv[1:] if argv is None else argv)
    started = time.perf_counter()
    source = meta.get("source") or args.history.name
    run = anchor_replay.replay(
        commits, tickets, source, project, quiet=args.rule == "quiet", progress=args.progress
    )
    report: dict[str, Any] = {
        "command": command.strip(),
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "history": {
            "source": source,
            "head": meta.get("head"),
            "licence": meta.get("licence"),
            "commits": len(commits),
            "with a ticket": sum(1 for c in commits if c.keys),
            "from": commits[0].at.date().isoformat(),
            "to": commits[-1].at.date().isoformat(),
            "project": project,
        },
        "dataset": {**dataset.describe(), "project tickets": len(rows)},
        "staleness": staleness(run, commits),
        "naming": naming(rows, commits),
        "precision": precision(run, tickets, commits),
        "replay_s": round(time.perf_counter() - started, 1),
        "machine": machine.describe(None),
    }
    if args.json:
        print(json.dumps(report))
    else:
        print_report(report)
    return report


def project_of(commits: list[history.Commit]) -> str:
    """The Jira project most of the commits' keys belong to."""
    projects = Counter(key.rsplit("-", 1)[0] for c in commits for key in c.keys)
    return projects.most_common(1)[0][0] if projects else ""


def pct(value: float | None) -> str:
    """A share as a percentage, or n/a."""
    return "n/a" if value is None else f"{value:.1%}"


def print_report(report: dict[str, Any]) -> None:
    """The markdown report."""
    h, s, n, p = report["history"], report["staleness"], report["naming"], report["precision"]
    m = report["machine"]
    print("# Lessons anchored to code, on a real history\n")
    print(f"command: `{report['command']}`  ")
    print(
        f"date: {report['date']}; machine: {m['cpus']} cores, Python {m['python']}, "
        f"SQLite {m['sqlite']}; replay {report['replay_s']} s  "
    )
    print(
        f"history: {h['source']} @ {str(h['head'])[:12]} ({h['licence']}), {h['commits']:,} "
        f"commits {h['from']} .. {h['to']}, {h['with a ticket']:,} naming a ticket "
        f"of {h['project']}  "
    )
    d = report["dataset"]
    print(f"tickets: {d['name']}, {d['project tickets']:,} {h['project']} tickets\n")
    print("## Staleness\n")
    rules = ", ".join(f"{k} {v:,}" for k, v in sorted(s["by_rule"].items()))
    if s["rule"] == "quiet":
        busy = ", ".join(f"{path} ({n:,})" for path, n in s["busy_files_left_out"].items())
        print(
            "Capture rule: the bot's (playbook.anchors.capture), leaving out busy files too "
            f"(changed by >= "
            f"{history.Busy.SHARE:.0%} of the last {history.Busy.WINDOW} commits); left out of "
            f"most lessons: {busy or 'none'}.\n"
        )
    else:
        print("Capture rule: the bot's (playbook.anchors.capture).\n")
    print(
        f"{s['lessons']:,} lessons, {s['anchored']:,} anchored (capture rule: {rules}); "
        f"{s['flags']:,} flags ({s['flags_by_same_ticket']:,} by a commit of the lesson's own "
        f"ticket)\n"
    )
    print("| touched again within | lessons | by any commit | by another ticket's commit |")
    print("| --- | ---: | ---: | ---: |")
    for name, row in s["touched_again"].items():
        other = row["another ticket's commit"]
        print(f"| {name} | {row['lessons']:,} | {pct(row['any commit'])} | {pct(other)} |")
    print("\n| anchored by | lessons | touched within 30 days | flags per lesson-year |")
    print("| --- | ---: | ---: | ---: |")
    for kind, row in s["by_anchor_kind"].items():
        print(
            f"| {kind} | {row['lessons']:,} | {pct(row['touched within 30 days'])} | "
            f"{row['flags per lesson-year']} |"
        )
    print("\n| flagged lessons listed per week | weeks | median | p90 | max | mean |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for name, row in s["listed_per_week"].items():
        print(
            f"| {name} | {row['weeks']:,} | {row['median']:g} | {row['p90']} | {row['max']} | "
            f"{row['mean']} |"
        )
    never = s["flagged_if_never_cleared"]
    print(
        f"\nIf nobody ever cleared a flag: {never['at the end']:,} lessons flagged at the end "
        f"({pct(never['share of anchored'])} of the anchored), "
        f"{never['flagged in the last 3 years']:,} of them flagged in the last 3 years. "
        f"Renames followed: {s['renames_followed']:,}; lessons whose every file was deleted: "
        f"{s['every_file_gone']:,}; lessons whose anchors name no file at the end: "
        f"{s['anchors_naming_nothing_at_the_end']:,}.\n"
    )
    print("## Path matching\n")
    print(
        f"Of {n['tickets']:,} {h['project']} tickets (summary + first 2,000 characters of the "
        f"description): {pct(n['paths'])} name a path as `named_in` reads them "
        f"({pct(n['paths with a folder'])} with a folder); {pct(n['a repository file'])} name a "
        f"file of the repository ({pct(n['a repository file with its folder'])} with a folder); "
        f"{pct(n['stack frames'])} hold a "
        f"Java stack frame `(X.java:N)`, {pct(n['qualified classes'])} a qualified class "
        f"`org.x.Y`; {pct(n['frames or classes, no path'])} name code only those ways. "
        f"`named_in` finds a symbol in {pct(n['symbols'])} (every word-like run is one).\n"
    )
    print(
        f"{p['searched']:,} tickets fixed by a commit of the history were searched at their "
        "creation (k = 10), in the playbook with anchors and in the same one without. A right "
        "lesson is an earlier one anchored to a file the ticket's fix touched, by its folder or "
        "by the file's own name; the rank is the first right lesson's.\n"
    )
    print("| right lessons | tickets | n | first (anchors / without) | top 3 | top 10 |")
    print("| --- | --- | ---: | ---: | ---: | ---: |")
    for sense, block in p["senses"].items():
        for name, row in block["ranks"].items():
            w, wo = row["with_anchors"], row["without"]
            cells = " | ".join(f"{pct(w[k])} / {pct(wo[k])}" for k in ("top 1", "top 3", "top 10"))
            print(f"| {sense} | {name} | {row['tickets']:,} | {cells} |")
    senses = p["senses"]
    print(
        f"\nLessons the anchors raised: {p['anchored_hits']:,} on "
        f"{p['tickets_with_an_anchored_hit']:,} tickets; right by file or folder "
        f"{pct(senses['by file or folder']['anchored_hits_right'])}, by file "
        f"{pct(senses['by file']['anchored_hits_right'])}."
    )


if __name__ == "__main__":
    main()

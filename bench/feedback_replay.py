"""Replay the shared set with simulated 👍/👎 and watch each scope's recalibration over time.

Usage: python bench/feedback_replay.py [DATASET] [--generated] [--p 0,0.3,0.7] [--window 1000]
       [--reaction-seed N] [--off LOGODDS] [--prior-sd SD|none] [--no-cache]

Issues are replayed in creation order as bench/relevance_fit.py does (its replay, and its cache
in the temporary folder: each issue a lesson when it is created, each new issue first searched
with the default ranking and k = 5 in its own project); each Jira project is a scope. The
search's ranking never reads verdicts, so one replay's hits serve every arm: for each ticket
an arm applies its scope's shift to each hit's packaged estimate (`relevance.shifted`, as
`Retriever.search` does) and posts what `Floor.of(default).shown(...)` keeps.

Simulated people, with probability p per comment (the same draw per ticket in every arm):
- a comment holding no Jira-linked lesson gets a 👎 (on every lesson it shows);
- a comment holding a linked lesson gets a 👍. We chose to simulate 👍 too: a team that only
  ever 👎 teaches the estimate that nothing fits (the "👎 only" arm shows what that does).
Verdicts are recorded at once through `playbook.fit.labels.replace_reactions` against the
bot's comment row (its shown estimates), and the scope is refitted (`calibration.refit`), as
the handlers do when they read reactions. Each arm has its own scratch SQLite playbook; the
lessons there are stand-in rows (feedback never reads or changes a lesson).

Reported per window of tickets, for every arm and the no-feedback baseline of the same run:
the comment rate, comment precision (comments holding a linked lesson) and lesson precision
(shown lessons that are linked), and each scope's shift at the end. Deterministic by --seed.
"""

from __future__ import annotations

import argparse
import json
import random
import shlex
import sys
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import datasets  # noqa: E402
import machine  # noqa: E402
from dup_recall import scratch_playbook  # noqa: E402
from relevance_fit import cached_replay  # noqa: E402
from sqlalchemy import insert  # noqa: E402
from sqlalchemy.orm import Session  # noqa: E402

from playbook import clock  # noqa: E402
from playbook.fit import calibration, labels  # noqa: E402
from playbook.models import BotComment, Bullet  # noqa: E402
from playbook.search import relevance  # noqa: E402
from playbook.search.calibration import shift as calibration_shift  # noqa: E402
from playbook.search.floor import Floor, default_min_relevance  # noqa: E402

PS = (0.0, 0.3, 0.7)
WINDOW = 1000
SEED = 41
TARGET = "github"  # reactions are read on GitHub; the keys here are Jira's, which is all one


@dataclass(frozen=True)
class Shown:
    """A ranked lesson with its estimate, as `Floor.shown` takes it."""

    bullet_id: str
    relevance: float | None
    rank: int
    linked: bool


@dataclass(frozen=True)
class Arm:
    """Who reacts: 👎 on a comment with nothing linked, 👍 on one holding a linked lesson."""

    name: str
    down: float
    up: float


@dataclass
class Tally:
    """One window's counts."""

    tickets: int = 0
    comments: int = 0
    good: int = 0
    shown: int = 0
    linked: int = 0
    verdicts: int = 0

    def row(self) -> dict[str, Any]:
        """The window's rates."""
        return {
            "tickets": self.tickets,
            "comments": self.comments,
            "comment_rate": self.comments / self.tickets if self.tickets else 0.0,
            "comment_precision": self.good / self.comments if self.comments else 0.0,
            "lesson_precision": self.linked / self.shown if self.shown else 0.0,
            "relevant_comments": self.good,
            "reactions": self.verdicts,
        }


def estimates(tickets: list[dict[str, Any]], off: float = 0.0) -> list[list[float]]:
    """The packaged model's estimate of each shown lesson, from the replay's features; ``off``
    added to its log-odds plays a model that misjudges these teams' tickets by that much."""
    model = relevance.default_model()
    return [
        [
            relevance.shifted(model.probability(dict(zip(relevance.FEATURES, f, strict=True))), off)
            for f in t["features"]
        ]
        for t in tickets
    ]


def stand_in_lessons(session: Session, tickets: list[dict[str, Any]], scope_of: dict[str, str]):
    """One row per lesson ever shown, so verdicts can name it (their only use here)."""
    now = clock.now()
    ids = sorted({b for t in tickets for b in t["lessons"]})
    session.execute(
        insert(Bullet),
        [
            {
                "id": b,
                "text": b,
                "scope": scope_of.get(b, "global"),
                "created_at": now,
                "updated_at": now,
            }
            for b in ids
        ],
    )
    session.commit()


def run_arm(
    arm: Arm,
    tickets: list[dict[str, Any]],
    probs: list[list[float]],
    projects: list[str],
    draws: list[float],
    window: int,
    floor: Floor,
    scope_of: dict[str, str],
) -> dict[str, Any]:
    """Replay one arm; its windows' rates, each scope's shift and when it was first fitted."""
    windows: list[Tally] = []
    first_fit: dict[str, int] = {}
    with scratch_playbook(f"feedback-{arm.name.replace(' ', '-')}") as engine:
        session = Session(engine)
        stand_in_lessons(session, tickets, scope_of)
        for i, (t, ps, scope) in enumerate(zip(tickets, probs, projects, strict=True)):
            if i % window == 0:
                windows.append(Tally())
            tally = windows[-1]
            tally.tickets += 1
            shift = calibration_shift(session, scope)
            hits = [
                Shown(b, round(relevance.shifted(p, shift), 6), rank, bool(label))
                for rank, (b, p, label) in enumerate(
                    zip(t["lessons"], ps, t["labels"], strict=True), 1
                )
            ]
            shown = floor.shown(hits)
            if not shown:
                continue
            good = any(h.linked for h in shown)
            tally.comments += 1
            tally.good += good
            tally.shown += len(shown)
            tally.linked += sum(h.linked for h in shown)
            ids = [h.bullet_id for h in shown]
            session.add(
                BotComment(
                    target=TARGET,
                    ticket_key=t["key"],
                    purpose="lessons",
                    state="posted",
                    external_id=str(i),
                    bullet_ids=ids,
                    relevances=[h.relevance for h in shown],
                    body="",
                    created_at=clock.now(),
                    updated_at=clock.now(),
                )
            )
            react = draws[i] < (arm.up if good else arm.down)
            if react:
                labels.replace_reactions(session, TARGET, t["key"], ids, {"sim": good})
                tally.verdicts += 1
                fitted = calibration.refit(session, scope)
                if fitted is not None:
                    first_fit.setdefault(scope, i + 1)
            session.commit()
        shifts = {
            scope: round(calibration_shift(session, scope), 4) for scope in sorted(set(projects))
        }
        session.close()
    return {
        "arm": arm.name,
        "windows": [w.row() for w in windows],
        "total": total(windows).row(),
        "shifts": shifts,
        "first_fitted_at_ticket": first_fit,
    }


def total(windows: Iterable[Tally]) -> Tally:
    """The windows summed."""
    whole = Tally()
    for w in windows:
        for name in vars(whole):
            setattr(whole, name, getattr(whole, name) + getattr(w, name))
    return whole


def arms_for(ps: list[float]) -> list[Arm]:
    """The baseline (no feedback), each p, and 👎 only at the middle p."""
    arms = [Arm("no feedback", 0.0, 0.0)]
    arms += [Arm(f"p={p:g}", p, p) for p in ps]
    middle = sorted(p for p in ps if p > 0)
    if middle:
        p = middle[len(middle) // 2]
        arms.append(Arm(f"p={p:g} 👎 only", p, 0.0))
    return arms


def print_table(results: list[dict[str, Any]], window: int) -> None:
    """Per window: each arm's comment rate, comment precision, lesson precision."""
    names = [r["arm"] for r in results]
    print(f"per window of {window:,} tickets: comment rate / comment precision / lesson precision")
    print("tickets       " + "".join(f"{n:>26}" for n in names))
    for w in range(len(results[0]["windows"])):
        first = w * window + 1
        last = first + results[0]["windows"][w]["tickets"] - 1
        cells = []
        for r in results:
            row = r["windows"][w]
            cells.append(
                f"{row['comment_rate']:>9.1%} {row['comment_precision']:>7.1%} "
                f"{row['lesson_precision']:>7.1%}"
            )
        print(f"{first:>5}-{last:<7}" + "".join(f"{c:>26}" for c in cells))
    print(
        "all           "
        + "".join(
            f"{r['total']['comment_rate']:>9.1%} {r['total']['comment_precision']:>7.1%} "
            f"{r['total']['lesson_precision']:>7.1%}".rjust(26)
            for r in results
        )
    )
    for r in results:
        shifts = ", ".join(f"{s} {v:+.2f}" for s, v in r["shifts"].items())
        fitted = ", ".join(f"{s} at #{n:,}" for s, n in r["first_fitted_at_ticket"].items())
        print(
            f"  {r['arm']}: {r['total']['reactions']:,} reactions, "
            f"{r['total']['relevant_comments']:,} comments holding a linked lesson; "
            f"shift at the end: {shifts}" + (f"; first fitted: {fitted}" if fitted else "")
        )


def main() -> None:
    """Replay (or read the cache), run every arm, print the table and one JSON line."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    datasets.add_arguments(parser, positional=True)
    parser.add_argument("--p", default=",".join(f"{p:g}" for p in PS), help="reaction chances")
    parser.add_argument("--window", type=int, default=WINDOW, help="tickets per window")
    parser.add_argument("--reaction-seed", type=int, default=SEED, help="the people's dice")
    parser.add_argument(
        "--off",
        type=float,
        default=0.0,
        help="add this to the packaged estimate's log-odds: a model that over- (>0) or "
        "under-rates (<0) these teams' tickets, for the recalibration to correct",
    )
    parser.add_argument(
        "--prior-sd",
        default=str(calibration.PRIOR_SD),
        help="the shift's prior spread (calibration.PRIOR_SD), or 'none' for the likelihood alone",
    )
    parser.add_argument("--no-cache", action="store_true", help="replay even if cached")
    args = parser.parse_args()
    calibration.PRIOR_SD = None if args.prior_sd == "none" else float(args.prior_sd)
    ps = [float(p) for p in args.p.split(",") if p.strip()]
    if any(not 0.0 <= p <= 1.0 for p in ps) or args.window < 1:
        parser.error("--p takes chances between 0 and 1; --window at least 1")
    print("command: python " + shlex.join(["bench/feedback_replay.py", *sys.argv[1:]]))
    print(f"machine: {json.dumps(machine.describe(None))}")
    dataset = datasets.from_arguments(args)
    started = time.perf_counter()
    data = cached_replay(dataset, not args.no_cache)
    tickets = data["tickets"]
    project_of = {row["key"]: row["project"] for row in dataset.rows}
    projects = [project_of[t["key"]] for t in tickets]
    probs = estimates(tickets, args.off)
    dice = random.Random(args.reaction_seed)
    draws = [dice.random() for _ in tickets]
    floor = Floor.of(default_min_relevance())
    print(
        f"{dataset.name}: {len(tickets):,} tickets in {len(set(projects))} scopes; floor "
        f"{floor.comment:g} (lessons {floor.lesson:g}); a scope is fitted from "
        f"{calibration.MIN_LABELS} verdicts, shift within ±{calibration.MAX_SHIFT:.2f}, prior "
        f"spread {calibration.PRIOR_SD}; the packaged estimate off by {args.off:+g} in log-odds"
    )
    results = []
    for arm in arms_for(ps):
        arm_started = time.perf_counter()
        results.append(
            run_arm(arm, tickets, probs, projects, draws, args.window, floor, project_of)
        )
        print(f"  {arm.name}: {time.perf_counter() - arm_started:.0f} s", file=sys.stderr)
    print_table(results, args.window)
    baseline = results[0]["windows"]
    for r in results[1:]:
        if r["arm"] == "p=0":
            same = r["windows"] == baseline
            print(
                f"p=0 against no feedback: {'identical' if same else 'DIFFERENT'} in every window"
            )
    print(f"took {time.perf_counter() - started:.0f} s")
    line = {
        "dataset": dataset.describe(),
        "floor": floor.comment,
        "lesson_floor": floor.lesson,
        "window": args.window,
        "reaction_seed": args.reaction_seed,
        "min_labels": calibration.MIN_LABELS,
        "prior_sd": calibration.PRIOR_SD,
        "off": args.off,
        "max_shift": round(calibration.MAX_SHIFT, 4),
        "arms": [
            {
                **r,
                "windows": [
                    {k: round(v, 4) if isinstance(v, float) else v for k, v in w.items()}
                    for w in r["windows"]
                ],
                "total": {
                    k: round(v, 4) if isinstance(v, float) else v for k, v in r["total"].items()
                },
            }
            for r in results
        ],
        "machine": machine.describe(None),
    }
    print(json.dumps(line, ensure_ascii=False))


if __name__ == "__main__":
    main()

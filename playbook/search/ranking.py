"""Ranking formulas: feedback multiplier, freshness, and confidence from rated cites."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import numpy as np

RANK_MODES = ("feedback", "bm25", "reinforcements", "confidence", "hybrid")

# Confidence is the mean of a Beta(1, 1) prior updated by rated cites: a merged cite is a
# success, a rejected one a failure. The prior counts as one success and one failure, so an
# unused lesson sits at 0.5 and thin evidence is shrunk toward it.
PRIOR_SUCCESSES = 1.0
PRIOR_FAILURES = 1.0
START_CONFIDENCE = PRIOR_SUCCESSES / (PRIOR_SUCCESSES + PRIOR_FAILURES)
HALF_LIFE_DAYS = None  # confidence does not fade with time; see `confidence`
HYBRID_ALPHA = 0.7
# In `feedback` ranking a lesson's text match fades while nobody cites or changes it: the part
# above FRESHNESS_FLOOR halves every FRESHNESS_HALF_LIFE_DAYS. Months, not days, because a
# lesson is about a kind of problem, and that kind recurs while the code around it is alive;
# the floor keeps a strong old match above a weak new one.
FRESHNESS_HALF_LIFE_DAYS = 180.0
FRESHNESS_FLOOR = 0.5


def feedback_multiplier(successes: int, failures: int) -> float:
    """``2 ** (avg * (0.4 + 0.6 * min(n, 5) / 5))`` over the ratings (+1 success, -1 failure).

    One rating nudges (x1.43 or x0.70); five or more give the full x2 or x0.5. Loads are
    not ratings: being shown says nothing about being useful. Like `confidence`, it is
    above 1 exactly when merged cites outnumber rejected ones, more successes never lower
    it and more failures never raise it (tests check every count up to 60).
    """
    n = successes + failures
    if n == 0:
        return 1.0
    average = (successes - failures) / n
    return 2 ** (average * (0.4 + 0.6 * min(n, 5) / 5))


# A model's ratings weigh less than an explicit cite: all of them together move a lesson's
# score by at most 2 ** RATING_WEIGHT (x1.41 up, x0.71 down) where cites move it x2 / x0.5.
RATING_WEIGHT = 0.5


def rating_multiplier(ratings: int, rating_sum: float) -> float:
    """``2 ** (RATING_WEIGHT * mean * min(n, 5) / 5)`` over a lesson's model ratings in [-1, 1].

    Confidence grows with the number of ratings, so one rating nudges (x1.07 at +1) and five
    decide (x1.41); a higher mean never lowers it. No ratings: 1.
    """
    if ratings <= 0:
        return 1.0
    mean = max(-1.0, min(1.0, rating_sum / ratings))
    return float(2 ** (RATING_WEIGHT * mean * min(ratings, 5) / 5))


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
    """How often a lesson's cites were in merged work, from 0 to 1; 0.5 before any evidence.

    ``(successes + 1) / (successes + failures + 2)``: the posterior mean of a Beta(1, 1)
    prior, so one merged cite gives 0.667, five 0.857, and 20 merged with 10 rejected
    0.656. More successes never lower it and more failures never raise it; it is above
    0.5 exactly when merged cites outnumber rejected ones.

    Evidence does not fade with time, and ``last_used_at``, ``now`` and ``half_life_days``
    are accepted only so existing callers keep working. Fading every past cite by the time
    since the *last* use cannot keep that promise: a new merged cite would make old rejected
    ones count in full again and lower the value. Age is `freshness`'s job instead.
    """
    del last_used_at, now, half_life_days  # see the docstring: kept for callers, not used
    # Counters never go below zero; if a hand-edited row says otherwise, stay within 0..1.
    wins, losses = max(successes, 0), max(failures, 0)
    return (wins + PRIOR_SUCCESSES) / (wins + losses + PRIOR_SUCCESSES + PRIOR_FAILURES)

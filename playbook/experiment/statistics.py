"""The holdout's merge-rate statistics in closed form: Wilson, Newcombe, the score test, Holm.

Every lesson's effect (the CLI's ``show``, a lesson read over MCP or HTTP, the web page) goes
through here, so this module imports nothing beyond the standard library: scipy, statsmodels and
pandas cost over a second of start-up, and statsmodels' Holm runs a ``gc.collect()`` on every
call (seconds in a large process). The whole-experiment report's bootstrap, power and sample
ratio live in ``arms``, which only ``report.build`` imports.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist
from typing import Any

ALPHA = 0.05
MIN_TICKETS = 20

Interval = tuple[float, float]


@dataclass(frozen=True)
class ArmCounts:
    """One arm's tickets: how many, how many have an outcome, merged, and their measures."""

    tickets: int
    with_outcome: int
    merged: int
    merge_hours: Sequence[float] = ()
    review_rounds: Sequence[int] = ()

    def __post_init__(self) -> None:
        """Refuse counts that cannot be (more merged than outcomes, negative, non-finite)."""
        if not 0 <= self.merged <= self.with_outcome <= self.tickets:
            raise ValueError(
                f"need 0 <= merged <= with_outcome <= tickets, got {self.merged}, "
                f"{self.with_outcome}, {self.tickets}"
            )
        if not all(math.isfinite(h) and h >= 0 for h in self.merge_hours):
            raise ValueError("merge_hours must be finite and non-negative")
        if any(r < 0 for r in self.review_rounds):
            raise ValueError("review_rounds must be non-negative")
        # Tuples, so the frozen dataclass is really immutable and hashable.
        object.__setattr__(self, "merge_hours", tuple(float(h) for h in self.merge_hours))
        object.__setattr__(self, "review_rounds", tuple(int(r) for r in self.review_rounds))

    @property
    def merge_rate(self) -> float | None:
        """Merged over tickets with an outcome; None while none has one."""
        return self.merged / self.with_outcome if self.with_outcome else None


@dataclass(frozen=True)
class Comparison:
    """A difference of two merge rates (shown minus held out) and its 95% interval."""

    difference: float
    low: float
    high: float

    @property
    def conclusive(self) -> bool:
        """Whether the whole interval lies on one side of zero."""
        return self.low > 0 or self.high < 0


def critical_value(alpha: float = ALPHA) -> float:
    """The standard normal quantile a two-sided 1 - alpha interval reaches: 1.96 for 5%."""
    return NormalDist().inv_cdf(1 - alpha / 2)


def wilson_interval(merged: int, n: int, alpha: float = ALPHA) -> Interval | None:
    """The Wilson score interval of merged/n; None when n is 0."""
    if n <= 0:
        return None
    return _around(merged / n, *_wilson(merged, n, critical_value(alpha)), floor=0.0)


def newcombe_difference(
    m1: int, n1: int, m2: int, n2: int, alpha: float = ALPHA
) -> Comparison | None:
    """m1/n1 minus m2/n2 with Newcombe's hybrid score interval; None if either n is 0."""
    if n1 <= 0 or n2 <= 0:
        return None
    return _newcombe(m1, n1, m2, n2, critical_value(alpha))


def score_p_value(m1: int, n1: int, m2: int, n2: int) -> float:
    """The two-sided p-value of m1/n1 - m2/n2 = 0 by the score test (both n above 0).

    The score test's variance is the pooled rate's, times N/(N - 1) (Miettinen and Nurminen,
    1985; statsmodels' ``test_proportions_2indep(method="score")``): its z squared is Pearson's
    chi-square times (N - 1)/N, the "N - 1" chi-square. When both sides merged all (or none) of
    their tickets the variance is 0 and so is the difference: p is 1, not NaN.
    """
    total = n1 + n2
    pooled = (m1 + m2) / total
    variance = (pooled * (1 - pooled) / n1 + pooled * (1 - pooled) / n2) * (total / (total - 1))
    if variance <= 0:
        return 1.0
    z = (m1 / n1 - m2 / n2) / math.sqrt(variance)
    # Two normal tails: 2 (1 - Phi(|z|)) = erfc(|z| / sqrt 2), exact far into the tails.
    return min(math.erfc(abs(z) / math.sqrt(2)), 1.0)


def holm(p_values: Sequence[float], alpha: float = ALPHA) -> list[tuple[float, bool]]:
    """Holm's step-down adjusted p-value of each p-value, in order, and whether it is rejected.

    The k-th smallest of m p-values is multiplied by m - k + 1, each adjusted value is the
    largest so far (so they rise with the p-values) and at most 1; rejection stops at the
    first p-value above alpha / (m - k + 1) (Holm, 1979), as statsmodels'
    ``multipletests(method="holm")`` decides it.
    """
    m = len(p_values)
    adjusted: list[tuple[float, bool]] = [(1.0, False)] * m
    largest = 0.0
    rejecting = True
    for k, i in enumerate(sorted(range(m), key=p_values.__getitem__)):
        p = p_values[i]
        rejecting = rejecting and not p > alpha / (m - k)
        largest = max(largest, p * (m - k))
        adjusted[i] = (min(largest, 1.0), rejecting)
    return adjusted


def lesson_effect(
    shown: ArmCounts, held_out: ArmCounts, min_tickets: int = MIN_TICKETS
) -> dict[str, Any]:
    """One lesson's measured effect, compared alone (a family of one, see ``lesson_effects``)."""
    return lesson_effects([(shown, held_out)], min_tickets)[0]


def lesson_effects(
    sides: Sequence[tuple[ArmCounts, ArmCounts]], min_tickets: int = MIN_TICKETS
) -> list[dict[str, Any]]:
    """The measured effect of many lessons (shown, held out), in their order, compared together.

    Each lesson's difference gets Newcombe's 95% interval and a two-sided score test's p-value
    (both whenever each side has an outcome). The lessons with ``min_tickets`` tickets with an
    outcome on both sides are the family compared: testing each at 5% would call about one
    lesson in 40 harmful (or helpful) by chance alone, so their p-values are adjusted together
    by Holm's step-down, which holds the chance of any false call in the family at 5% however
    the lessons' tests depend on each other (lessons shown together share tickets). A lesson
    is measured harmful (helpful) when its whole interval is below (above) zero and Holm's
    step-down still rejects "no difference" for it. Each effect carries ``p_value``,
    ``adjusted_p_value`` (None outside the family) and ``compared``, the family's size (None
    outside it).
    """
    z = critical_value(ALPHA)
    comparisons: list[Comparison | None] = [None] * len(sides)
    p_values: list[float | None] = [None] * len(sides)
    family: dict[int, float] = {}
    for i, (shown, held_out) in enumerate(sides):
        if shown.with_outcome <= 0 or held_out.with_outcome <= 0:
            continue
        sizes = (shown.merged, shown.with_outcome, held_out.merged, held_out.with_outcome)
        comparisons[i] = _newcombe(*sizes, z)
        p_values[i] = p = score_p_value(*sizes)
        if min(shown.with_outcome, held_out.with_outcome) >= min_tickets:
            family[i] = p
    adjusted = dict(zip(family, holm(list(family.values()), ALPHA), strict=True))
    return [
        _effect(
            shown,
            held_out,
            comparison,
            p_value,
            adjusted.get(i),
            len(family) if i in adjusted else None,
        )
        for i, ((shown, held_out), comparison, p_value) in enumerate(
            zip(sides, comparisons, p_values, strict=True)
        )
    ]


def _wilson(merged: int, n: int, z: float) -> Interval:
    """Wilson's (1927) interval of merged/n (n above 0) at critical value z, within [0, 1].

    (p + z²/2n ± z·sqrt(p(1 - p)/n + z²/4n²)) / (1 + z²/n), in statsmodels' order of
    operations; its ends lie in [0, 1] exactly, and are clipped there against rounding.
    """
    p = merged / n
    z2 = z * z
    denominator = 1 + z2 / n
    centre = (p + z2 / (2 * n)) / denominator
    half = z * math.sqrt(p * (1.0 - p) / n + z2 / (4.0 * n**2)) / denominator
    return max(centre - half, 0.0), min(centre + half, 1.0)


def _newcombe(m1: int, n1: int, m2: int, n2: int, z: float) -> Comparison:
    """Newcombe's (1998) method 10 for m1/n1 - m2/n2 (both n above 0): each side's Wilson
    interval, the distances from each rate to its ends combined in quadrature."""
    p1, p2 = m1 / n1, m2 / n2
    low1, high1 = _wilson(m1, n1, z)
    low2, high2 = _wilson(m2, n2, z)
    difference = p1 - p2
    low = difference - math.sqrt((p1 - low1) ** 2 + (high2 - p2) ** 2)
    high = difference + math.sqrt((p2 - low2) ** 2 + (high1 - p1) ** 2)
    return Comparison(difference, *_around(difference, low, high, floor=-1.0))


def _effect(
    shown: ArmCounts,
    held_out: ArmCounts,
    comparison: Comparison | None,
    p_value: float | None,
    adjusted: tuple[float, bool] | None,
    compared: int | None,
) -> dict[str, Any]:
    """A lesson's effect from its two sides, their difference's interval and test; ``adjusted``
    is its Holm-adjusted p-value and whether it is rejected, None outside the family."""
    return {
        "shown": counts(shown),
        "held_out": counts(held_out),
        "difference": None if comparison is None else comparison.difference,
        "ci": None if comparison is None else [comparison.low, comparison.high],
        "p_value": p_value,
        "adjusted_p_value": None if adjusted is None else adjusted[0],
        "compared": compared,
        "verdict": _lesson_verdict(comparison, adjusted, compared),
    }


def _lesson_verdict(
    comparison: Comparison | None, adjusted: tuple[float, bool] | None, compared: int | None
) -> str:
    """What a lesson's effect shows, claiming harm or help only when the family's test agrees."""
    if comparison is None or adjusted is None or compared is None:
        return "not enough data"
    if not comparison.conclusive:
        return "no clear effect"
    side = "below" if comparison.high < 0 else "above"
    if adjusted[1]:
        return "measured harmful" if side == "below" else "measured helpful"
    if compared > 1:
        why = f"not after allowing for the {compared:,} lessons compared"
    else:
        # A lone lesson: Newcombe's interval and the score test disagree at the edge.
        why = f"not by the test of the difference (p = {adjusted[0]:.2f})"
    return f"no clear effect: {side} zero, but {why}"


def counts(arm: ArmCounts) -> dict[str, int]:
    """An arm's three counts, as the report shows them."""
    return {"tickets": arm.tickets, "with_outcome": arm.with_outcome, "merged": arm.merged}


def _around(estimate: float, low: float, high: float, floor: float) -> Interval:
    """An interval kept within [floor, 1] and around its estimate.

    Both hold exactly for Wilson and Newcombe; rounding can break them by a hair (7/7's Wilson
    interval ends at 0.9999999999999999), which would show as a 100% rate outside its interval.
    """
    return max(min(low, estimate), floor), min(max(high, estimate), 1.0)

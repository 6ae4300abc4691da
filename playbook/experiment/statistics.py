"""The holdout's statistics: merge rates, their difference, power, sample ratio and verdicts."""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import stats
from statsmodels.stats.multitest import multipletests
from statsmodels.stats.power import NormalIndPower
from statsmodels.stats.proportion import (
    confint_proportions_2indep,
    proportion_confint,
    proportion_effectsize,
    test_proportions_2indep,
)
from statsmodels.tools.sm_exceptions import ConvergenceWarning

ALPHA = 0.05
POWER = 0.8
# Real sample ratio mismatches (a broken assignment, lost logs) give p-values far below this;
# the check runs again every time the report is read, so a looser threshold would raise false
# alarms that teach readers to ignore it (Fabijan et al., "Diagnosing Sample Ratio Mismatch",
# KDD 2019, use the same 0.001).
SRM_P_VALUE = 0.001
# Fewer merge times than this make a bootstrap interval of the median no more than their range.
MIN_BOOTSTRAP_VALUES = 5
BOOTSTRAP_RESAMPLES = 9_999
# From this many values on, the interval comes from the bootstrap distribution itself rather
# than from resamples: 9,999 resamples of n values cost n x 9,999 draws and medians (30 s for
# 50,000 merge times), the exact distribution one binomial tail per distinct value (ms).
EXACT_BOOTSTRAP_FROM = 1_000
# The differences the report says how many tickets would detect, in points of merge rate.
DETECTABLE_POINTS = (5, 10)
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


def wilson_interval(merged: int, n: int, alpha: float = ALPHA) -> Interval | None:
    """The Wilson score interval of merged/n; None when n is 0."""
    if n <= 0:
        return None
    low, high = proportion_confint(merged, n, alpha=alpha, method="wilson")
    return _around(merged / n, float(low), float(high), floor=0.0)


def newcombe_difference(
    m1: int, n1: int, m2: int, n2: int, alpha: float = ALPHA
) -> Comparison | None:
    """m1/n1 minus m2/n2 with Newcombe's hybrid score interval; None if either n is 0."""
    if n1 <= 0 or n2 <= 0:
        return None
    # statsmodels spells it "newcomb": Newcombe's (1998) method 10, Wilson intervals combined.
    low, high = confint_proportions_2indep(
        m1, n1, m2, n2, method="newcomb", compare="diff", alpha=alpha
    )
    difference = m1 / n1 - m2 / n2
    return Comparison(difference, *_around(difference, float(low), float(high), floor=-1.0))


def bootstrap_median_ci(
    values: Sequence[float], seed: int = 0, alpha: float = ALPHA
) -> Interval | None:
    """A percentile bootstrap interval of the median, the same for the same seed; None if few.

    Up to EXACT_BOOTSTRAP_FROM values it resamples; from there on it reads the same interval
    off the bootstrap distribution itself (``exact_bootstrap_median_ci``), which is what the
    resamples estimate and costs milliseconds where resampling would cost seconds.
    """
    if len(values) < MIN_BOOTSTRAP_VALUES:
        return None
    if len(values) >= EXACT_BOOTSTRAP_FROM:
        return exact_bootstrap_median_ci(values, alpha)
    return resampled_median_ci(values, seed, alpha)


def resampled_median_ci(
    values: Sequence[float], seed: int = 0, alpha: float = ALPHA
) -> Interval | None:
    """The percentile bootstrap interval of the median from BOOTSTRAP_RESAMPLES resamples."""
    if len(values) < MIN_BOOTSTRAP_VALUES:
        return None
    # Percentile, not scipy's default BCa: BCa's jackknife divides by zero when merge times
    # tie (they often do, rounded to hours), giving NaN and a RuntimeWarning.
    result = stats.bootstrap(
        (np.asarray(values, dtype=float),),
        np.median,
        confidence_level=1 - alpha,
        n_resamples=BOOTSTRAP_RESAMPLES,
        method="percentile",
        rng=np.random.default_rng(seed),
    )
    low, high = result.confidence_interval
    return float(low), float(high)


def exact_bootstrap_median_ci(values: Sequence[float], alpha: float = ALPHA) -> Interval | None:
    """The percentile bootstrap interval of the median, from the exact bootstrap distribution.

    A resample of n draws from the sample has its k-th smallest value at most x(j), the
    sample's j-th smallest, exactly when at least k draws fall among x(1)..x(j), each with
    probability j/n: P(k-th <= x(j)) = P(Binomial(n, j/n) >= k) (Efron, 1982). Its quantiles
    are what infinitely many resamples would give. For odd n the median is the (n+1)/2-th
    value; for even n, np.median's average of the n/2-th and the next lies between their
    quantiles, and their mean is taken: one order statistic apart, far inside the interval at
    the sizes this serves.
    """
    if len(values) < MIN_BOOTSTRAP_VALUES:
        return None
    distinct, counts = np.unique(np.asarray(values, dtype=float), return_counts=True)
    n = int(counts.sum())
    # Draws among the values up to each distinct one: j for its last copy.
    share = np.cumsum(counts) / n
    middles = (n // 2, n // 2 + 1) if n % 2 == 0 else ((n + 1) // 2,)
    ends = []
    for q in (alpha / 2, 1 - alpha / 2):
        found = []
        for k in middles:
            cdf = stats.binom.sf(k - 1, n, share)
            # The smallest value whose CDF reaches q (the last one's is 1, bar rounding).
            index = min(int(np.searchsorted(cdf, q, side="left")), len(distinct) - 1)
            found.append(float(distinct[index]))
        ends.append(sum(found) / len(found))
    return ends[0], ends[1]


def tickets_needed(
    p_base: float, difference: float, power: float = POWER, alpha: float = ALPHA
) -> int | None:
    """Tickets with an outcome per arm to detect a difference of this size from p_base.

    Both directions that stay within [0, 1] are tried and the larger need is returned, since
    the test is two-sided; None when the difference is 0, fits neither way or is 0% against
    100% (where statsmodels' solver finds no size).
    """
    size = abs(difference)
    if size == 0 or not 0 <= p_base <= 1:
        return None
    needs = []
    for other in (p_base + size, p_base - size):
        if 0 <= other <= 1:
            effect = proportion_effectsize(other, p_base)
            # At the largest effect (0% against 100%) the root finder steps to negative sample
            # sizes and gives up: a warning and NaN, which is read here as "cannot say".
            with (
                np.errstate(invalid="ignore"),
                warnings.catch_warnings(action="ignore", category=ConvergenceWarning),
            ):
                n = NormalIndPower().solve_power(
                    effect_size=effect, power=power, alpha=alpha, ratio=1.0
                )
            if math.isfinite(n):
                needs.append(math.ceil(float(n)))
    return max(needs) if needs else None


def sample_ratio_mismatch(shown: int, held_out: int, held_out_share: float) -> dict[str, Any]:
    """Arm sizes tested against the configured split (chi-square); a mismatch is a warning."""
    if not 0 < held_out_share < 1:
        raise ValueError(f"held_out_share must be between 0 and 1, got {held_out_share}")
    total = shown + held_out
    report: dict[str, Any] = {
        "expected_held_out_share": held_out_share,
        "observed_held_out_share": held_out / total if total else None,
        "p_value": None,
        "mismatch": False,
        "warning": None,
    }
    if total == 0:
        return report
    expected = [total * (1 - held_out_share), total * held_out_share]
    p_value = float(stats.chisquare([shown, held_out], f_exp=expected).pvalue)
    report["p_value"] = p_value
    if p_value < SRM_P_VALUE:
        report["mismatch"] = True
        report["warning"] = (
            f"Sample ratio mismatch: {shown:,} tickets shown and {held_out:,} held out, against "
            f"a configured {round(100 * (1 - held_out_share))}/{round(100 * held_out_share)} "
            f"split (p < {SRM_P_VALUE}): the assignment or its logging is broken, so no effect "
            "below can be trusted."
        )
    return report


def verdict_sentence(shown: ArmCounts, held_out: ArmCounts) -> str:
    """One plain sentence on the merge-rate difference that claims no more than the data show."""
    comparison = newcombe_difference(
        shown.merged, shown.with_outcome, held_out.merged, held_out.with_outcome
    )
    if comparison is None:
        return "Not enough data: an arm has no ticket with an outcome yet."
    points = round(100 * comparison.difference)
    if points > 0:
        how = f"{points} points more often than"
    elif points < 0:
        how = f"{-points} points less often than"
    else:
        how = "about as often as"
    head = (
        f"Tickets shown lessons merged {how} tickets held out "
        f"(95% CI {_points(comparison.low)} to {_points(comparison.high)})"
    )
    if comparison.low > 0:
        return f"{head}: the whole interval is above zero, so this is unlikely to be chance."
    if comparison.high < 0:
        return f"{head}: the whole interval is below zero, so this is unlikely to be chance."
    base = held_out.merge_rate
    needed = None if base is None else tickets_needed(base, comparison.difference)
    if needed is None:
        return f"{head}: not conclusive yet."
    more = needed - min(shown.with_outcome, held_out.with_outcome)
    if more <= 0:
        return (
            f"{head}: not conclusive yet; the arms are already large enough for a difference "
            "this size, so the true difference is likely smaller or none."
        )
    return (
        f"{head}: not conclusive yet; about {more:,} more tickets with an outcome in each arm "
        "would show a difference this size."
    )


def compare(
    shown: ArmCounts, held_out: ArmCounts, held_out_share: float, seed: int = 0
) -> dict[str, Any]:
    """The report on both arms: sample ratio, each arm, the difference, a verdict, tickets needed.

    A sample ratio mismatch comes first in the report and leads the verdict, since it makes
    any effect untrustworthy.
    """
    srm = sample_ratio_mismatch(shown.tickets, held_out.tickets, held_out_share)
    comparison = newcombe_difference(
        shown.merged, shown.with_outcome, held_out.merged, held_out.with_outcome
    )
    verdict = verdict_sentence(shown, held_out)
    if srm["mismatch"]:
        verdict = f"{srm['warning']} {verdict}"
    return {
        "srm": srm,
        "arms": {"shown": _arm(shown, seed), "held_out": _arm(held_out, seed)},
        "difference": {
            "merge_rate": None if comparison is None else comparison.difference,
            "ci": None if comparison is None else [comparison.low, comparison.high],
        },
        "verdict": verdict,
        "needed": [
            {"points": p, "tickets_per_arm": tickets_needed(_base_rate(shown, held_out), p / 100)}
            for p in DETECTABLE_POINTS
        ],
    }


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

    statsmodels computes the intervals and the tests over arrays: one call for thousands of
    lessons costs about what one lesson's does, where a call each would cost a report 0.15 ms
    a lesson.
    """
    usable = [i for i, (s, h) in enumerate(sides) if s.with_outcome > 0 and h.with_outcome > 0]
    comparisons: list[Comparison | None] = [None] * len(sides)
    p_values: list[float | None] = [None] * len(sides)
    if usable:
        m1 = np.array([sides[i][0].merged for i in usable])
        n1 = np.array([sides[i][0].with_outcome for i in usable])
        m2 = np.array([sides[i][1].merged for i in usable])
        n2 = np.array([sides[i][1].with_outcome for i in usable])
        lows, highs = confint_proportions_2indep(
            m1, n1, m2, n2, method="newcomb", compare="diff", alpha=ALPHA
        )
        differences = m1 / n1 - m2 / n2
        tested = _score_p_values(m1, n1, m2, n2)
        for i, difference, low, high, p in zip(
            usable, differences, lows, highs, tested, strict=True
        ):
            d = float(difference)
            comparisons[i] = Comparison(d, *_around(d, float(low), float(high), floor=-1.0))
            p_values[i] = float(p)
    family = [
        i for i in usable if min(sides[i][0].with_outcome, sides[i][1].with_outcome) >= min_tickets
    ]
    adjusted: dict[int, tuple[float, bool]] = {}
    if family:
        # statsmodels' Holm ends with a gc.collect(): tens of ms in a large process, once a
        # report.
        rejected, corrected, _, _ = multipletests(
            [p_values[i] for i in family], alpha=ALPHA, method="holm"
        )
        adjusted = {
            i: (min(float(q), 1.0), bool(r))
            for i, q, r in zip(family, corrected, rejected, strict=True)
        }
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


def _score_p_values(m1: np.ndarray, n1: np.ndarray, m2: np.ndarray, n2: np.ndarray) -> np.ndarray:
    """Two-sided p-values of m1/n1 - m2/n2 = 0 by the score test, over arrays.

    When both sides merged all (or none) of their tickets the pooled rate is 1 (or 0), the
    test's variance 0 and its p-value NaN: the difference is exactly 0, so p is 1.
    """
    # statsmodels also computes the ratio and odds ratio, which divide by zero at 0% or 100%.
    with np.errstate(divide="ignore", invalid="ignore"):
        result = test_proportions_2indep(
            m1, n1, m2, n2, method="score", compare="diff", alternative="two-sided"
        )
    p = np.atleast_1d(np.asarray(result.pvalue, dtype=float))
    return np.clip(np.nan_to_num(p, nan=1.0), 0.0, 1.0)


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
        "shown": _counts(shown),
        "held_out": _counts(held_out),
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


def _arm(arm: ArmCounts, seed: int) -> dict[str, Any]:
    """One arm's part of the report."""
    interval = wilson_interval(arm.merged, arm.with_outcome)
    hours = bootstrap_median_ci(arm.merge_hours, seed)
    return {
        **_counts(arm),
        "merge_rate": arm.merge_rate,
        "merge_rate_ci": None if interval is None else list(interval),
        "median_hours_to_merge": float(np.median(arm.merge_hours)) if arm.merge_hours else None,
        "median_hours_to_merge_ci": None if hours is None else list(hours),
        "mean_review_rounds": float(np.mean(arm.review_rounds)) if arm.review_rounds else None,
    }


def _counts(arm: ArmCounts) -> dict[str, int]:
    """An arm's three counts."""
    return {"tickets": arm.tickets, "with_outcome": arm.with_outcome, "merged": arm.merged}


def _base_rate(shown: ArmCounts, held_out: ArmCounts) -> float:
    """The rate to size the sample from: held out's, else both arms', else 0.5 (the most)."""
    if held_out.merge_rate is not None:
        return held_out.merge_rate
    with_outcome = shown.with_outcome + held_out.with_outcome
    # Near 0.5 a difference is hardest to detect, so with no data the need is not understated.
    return (shown.merged + held_out.merged) / with_outcome if with_outcome else 0.5


def _around(estimate: float, low: float, high: float, floor: float) -> Interval:
    """An interval kept within [floor, 1] and around its estimate.

    Both hold exactly for Wilson and Newcombe; rounding can break them by a hair (7/7's Wilson
    interval ends at 0.9999999999999999), which would show as a 100% rate outside its interval.
    """
    return max(min(low, estimate), floor), min(max(high, estimate), 1.0)


def _points(value: float) -> str:
    """A rate difference as signed percentage points: +18, -2, 0."""
    points = round(100 * value)
    return f"{points:+d}" if points else "0"

"""The whole experiment's two arms compared: sample ratio, merge times, power and a verdict.

The report's heavy part (scipy's bootstrap and chi-square, statsmodels' power), kept apart
from ``statistics`` so that reading one lesson's effect never imports them: only
``report.build`` imports this module.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np
from scipy import stats
from statsmodels.stats.power import NormalIndPower
from statsmodels.stats.proportion import proportion_effectsize
from statsmodels.tools.sm_exceptions import ConvergenceWarning

from playbook.experiment.statistics import (
    ALPHA,
    ArmCounts,
    Interval,
    counts,
    newcombe_difference,
    wilson_interval,
)

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


def _arm(arm: ArmCounts, seed: int) -> dict[str, Any]:
    """One arm's part of the report."""
    interval = wilson_interval(arm.merged, arm.with_outcome)
    hours = bootstrap_median_ci(arm.merge_hours, seed)
    return {
        **counts(arm),
        "merge_rate": arm.merge_rate,
        "merge_rate_ci": None if interval is None else list(interval),
        "median_hours_to_merge": float(np.median(arm.merge_hours)) if arm.merge_hours else None,
        "median_hours_to_merge_ci": None if hours is None else list(hours),
        "mean_review_rounds": float(np.mean(arm.review_rounds)) if arm.review_rounds else None,
    }


def _base_rate(shown: ArmCounts, held_out: ArmCounts) -> float:
    """The rate to size the sample from: held out's, else both arms', else 0.5 (the most)."""
    if held_out.merge_rate is not None:
        return held_out.merge_rate
    with_outcome = shown.with_outcome + held_out.with_outcome
    # Near 0.5 a difference is hardest to detect, so with no data the need is not understated.
    return (shown.merged + held_out.merged) / with_outcome if with_outcome else 0.5


def _points(value: float) -> str:
    """A rate difference as signed percentage points: +18, -2, 0."""
    points = round(100 * value)
    return f"{points:+d}" if points else "0"

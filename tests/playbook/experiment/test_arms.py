"""The whole experiment's arms compared: bootstrap, power, sample ratio, verdicts, no NaN."""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from playbook.experiment.arms import (
    EXACT_BOOTSTRAP_FROM,
    bootstrap_median_ci,
    compare,
    exact_bootstrap_median_ci,
    resampled_median_ci,
    sample_ratio_mismatch,
    tickets_needed,
    verdict_sentence,
)
from playbook.experiment.statistics import ArmCounts


def test_bootstrap_median_ci_is_seeded_and_covers_the_median() -> None:
    values = [1.0, 2.0, 3.0, 5.0, 8.0, 13.0, 21.0, 34.0, 55.0]
    interval = bootstrap_median_ci(values, seed=7)
    assert interval == bootstrap_median_ci(values, seed=7)
    assert interval is not None
    assert interval[0] <= 8.0 <= interval[1]
    assert interval[0] >= 1.0
    assert interval[1] <= 55.0


def test_bootstrap_median_ci_needs_a_few_values_and_survives_ties() -> None:
    assert bootstrap_median_ci([1.0, 2.0, 3.0, 4.0]) is None
    assert bootstrap_median_ci([3.0] * 6) == (3.0, 3.0)


@pytest.mark.parametrize("n", [1_001, 1_000])
def test_the_exact_bootstrap_of_the_median_agrees_with_resampling(n: int) -> None:
    # Merge hours as they come: skewed, rounded to a tenth (ties), odd and even counts.
    values = np.random.default_rng(n).exponential(30.0, n).round(1).tolist()
    exact = exact_bootstrap_median_ci(values)
    resampled = resampled_median_ci(values, seed=3)
    assert exact is not None
    assert resampled is not None
    # 9,999 resamples estimate the exact quantiles to well under a tenth of the width.
    width = resampled[1] - resampled[0]
    assert exact == pytest.approx(resampled, abs=0.1 * width)
    assert exact[0] <= float(np.median(values)) <= exact[1]


def test_large_samples_take_the_exact_bootstrap() -> None:
    # 9,999 resamples of 50,000 values took 30 s; the exact distribution is what makes the
    # report fast at scale (bench/experiment_scale.py times it).
    values = np.random.default_rng(5).exponential(30.0, 50_000).tolist()
    interval = bootstrap_median_ci(values, seed=1)
    assert interval == exact_bootstrap_median_ci(values)
    assert interval is not None
    assert interval[0] < float(np.median(values)) < interval[1]
    # Below the threshold, the resampling path (seeded) is kept.
    few = values[: EXACT_BOOTSTRAP_FROM - 1]
    assert bootstrap_median_ci(few, seed=1) == resampled_median_ci(few, seed=1)


def test_tickets_needed_grows_as_the_difference_shrinks() -> None:
    ten, five, two = (tickets_needed(0.5, d) for d in (0.10, 0.05, 0.02))
    assert ten is not None
    assert five is not None
    assert two is not None
    assert ten < five < two
    # The textbook figure: about 390 per arm for 50% vs 60% at 80% power (Cohen's h = 0.2).
    assert 380 <= ten <= 400


def test_tickets_needed_near_the_edges_and_for_no_difference() -> None:
    assert tickets_needed(1.0, 0.05) is not None  # only downwards is possible
    assert tickets_needed(0.5, 0.0) is None
    assert tickets_needed(0.5, 0.6) is None  # 1.1 and -0.1 are both impossible
    # 0% against 100%: statsmodels' solver finds no size, and no NaN leaks out.
    assert tickets_needed(0.0, 1.0) is None


def test_srm_flags_a_60_40_split_but_not_noise() -> None:
    broken = sample_ratio_mismatch(6_000, 4_000, held_out_share=0.5)
    assert broken["mismatch"]
    assert "assignment or its logging is broken" in broken["warning"]
    fine = sample_ratio_mismatch(5_030, 4_970, held_out_share=0.5)
    assert not fine["mismatch"]
    assert fine["warning"] is None
    assert fine["p_value"] > 0.5


def test_srm_uses_the_configured_split() -> None:
    # 9,000/1,000 is right for a 10% holdout and badly wrong for a 50/50 one.
    assert not sample_ratio_mismatch(9_000, 1_000, held_out_share=0.1)["mismatch"]
    assert sample_ratio_mismatch(9_000, 1_000, held_out_share=0.5)["mismatch"]
    assert sample_ratio_mismatch(0, 0, held_out_share=0.1)["p_value"] is None


def test_verdict_for_a_conclusive_positive() -> None:
    sentence = verdict_sentence(ArmCounts(1000, 1000, 600), ArmCounts(1000, 1000, 500))
    assert sentence.startswith("Tickets shown lessons merged 10 points more often")
    assert "(95% CI +6 to +14)" in sentence
    assert "not conclusive" not in sentence


def test_verdict_for_a_conclusive_negative() -> None:
    sentence = verdict_sentence(ArmCounts(1000, 1000, 400), ArmCounts(1000, 1000, 500))
    assert sentence.startswith("Tickets shown lessons merged 10 points less often")
    assert "(95% CI -14 to -6)" in sentence
    assert "below zero" in sentence


def test_verdict_for_an_inconclusive_difference_says_how_many_more_tickets() -> None:
    shown, held_out = ArmCounts(120, 100, 58), ArmCounts(120, 100, 50)
    sentence = verdict_sentence(shown, held_out)
    more = tickets_needed(0.5, 0.08)
    assert more is not None
    assert sentence.startswith("Tickets shown lessons merged 8 points more often")
    assert "(95% CI -6 to +21)" in sentence
    assert f"not conclusive yet; about {more - 100:,} more tickets" in sentence


def test_verdict_for_one_ticket_each_is_not_conclusive() -> None:
    sentence = verdict_sentence(ArmCounts(1, 1, 1), ArmCounts(1, 1, 0))
    assert sentence.startswith("Tickets shown lessons merged 100 points more often")
    assert sentence.endswith("not conclusive yet.")


def test_verdict_without_outcomes_claims_nothing() -> None:
    sentence = verdict_sentence(ArmCounts(10, 0, 0), ArmCounts(10, 5, 5))
    assert sentence.startswith("Not enough data")


def test_compare_reports_the_json_shape() -> None:
    shown = ArmCounts(300, 200, 120, [float(h) for h in range(1, 121)], [1, 2, 3])
    held_out = ArmCounts(290, 190, 100, [10.0] * 100, [2, 2])
    report = compare(shown, held_out, held_out_share=0.5)
    assert json.loads(json.dumps(report)) == report
    assert report["arms"]["shown"]["merge_rate"] == pytest.approx(0.6)
    assert report["arms"]["shown"]["merge_rate_ci"] == pytest.approx([0.5308, 0.6654], abs=1e-4)
    assert report["arms"]["shown"]["median_hours_to_merge"] == 60.5
    assert report["arms"]["shown"]["mean_review_rounds"] == 2.0
    assert report["arms"]["held_out"]["median_hours_to_merge_ci"] == [10.0, 10.0]
    assert report["difference"]["merge_rate"] == pytest.approx(0.6 - 100 / 190)
    assert report["verdict"] == verdict_sentence(shown, held_out)
    assert [n["points"] for n in report["needed"]] == [5, 10]
    assert report["needed"][1]["tickets_per_arm"] == tickets_needed(100 / 190, 0.10)
    assert not report["srm"]["mismatch"]


def test_compare_puts_a_sample_ratio_mismatch_before_the_effect() -> None:
    report = compare(ArmCounts(6000, 600, 300), ArmCounts(4000, 400, 200), held_out_share=0.5)
    assert next(iter(report)) == "srm"
    assert report["verdict"].startswith("Sample ratio mismatch")


def test_compare_with_empty_arms_has_no_rates() -> None:
    report = compare(ArmCounts(0, 0, 0), ArmCounts(0, 0, 0), held_out_share=0.2)
    assert report["arms"]["shown"]["merge_rate"] is None
    assert report["arms"]["shown"]["merge_rate_ci"] is None
    assert report["difference"] == {"merge_rate": None, "ci": None}
    # With no data the need is sized at 50%, where it is largest.
    assert report["needed"][0]["tickets_per_arm"] == tickets_needed(0.5, 0.05)


@st.composite
def arms(draw: st.DrawFn) -> ArmCounts:
    """An arm with few tickets, so empty arms and 0% and 100% rates come up often."""
    tickets = draw(st.integers(0, 30))
    with_outcome = draw(st.integers(0, tickets))
    merged = draw(st.integers(0, with_outcome))
    hours = draw(st.lists(st.floats(0, 1_000), max_size=merged))
    rounds = draw(st.lists(st.integers(0, 10), max_size=with_outcome))
    return ArmCounts(tickets, with_outcome, merged, hours, rounds)


def _numbers(value: Any) -> list[Any]:
    """Every leaf of a report that is not a string or a bool."""
    if isinstance(value, dict):
        return [n for v in value.values() for n in _numbers(v)]
    if isinstance(value, list):
        return [n for v in value for n in _numbers(v)]
    return [] if isinstance(value, str | bool) else [value]


# The counts' intervals and tests are checked on every small case in test_statistics.py; here
# what the whole comparison adds (merge times, review rounds, power, the sample ratio).
@settings(max_examples=150, deadline=None)
@given(shown=arms(), held_out=arms(), share=st.sampled_from([0.1, 0.5, 0.9]))
def test_reports_have_no_nan_and_ordered_intervals(
    shown: ArmCounts, held_out: ArmCounts, share: float
) -> None:
    report = compare(shown, held_out, held_out_share=share)
    for number in _numbers(report):
        assert number is None or (isinstance(number, int | float) and math.isfinite(number))
    for arm in report["arms"].values():
        if arm["merge_rate_ci"] is not None:
            low, high = arm["merge_rate_ci"]
            assert 0 <= low <= arm["merge_rate"] <= high <= 1
        if arm["median_hours_to_merge_ci"] is not None:
            low, high = arm["median_hours_to_merge_ci"]
            assert low <= high
    ci = report["difference"]["ci"]
    if ci is not None:
        assert -1 <= ci[0] <= ci[1] <= 1
    assert report["verdict"]
    assert "nan" not in report["verdict"].lower()

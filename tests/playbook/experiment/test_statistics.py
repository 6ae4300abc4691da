"""The holdout's statistics: intervals against worked examples, power, SRM, verdicts, no NaN."""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from statsmodels.stats import proportion
from statsmodels.stats.multitest import multipletests

from playbook.experiment.statistics import (
    EXACT_BOOTSTRAP_FROM,
    ArmCounts,
    bootstrap_median_ci,
    compare,
    exact_bootstrap_median_ci,
    lesson_effect,
    lesson_effects,
    newcombe_difference,
    resampled_median_ci,
    sample_ratio_mismatch,
    tickets_needed,
    verdict_sentence,
    wilson_interval,
)


def test_wilson_interval_of_8_in_10() -> None:
    # By hand: (p + z²/2n ± z·sqrt(p(1-p)/n + z²/4n²)) / (1 + z²/n) with p = 0.8, z = 1.96.
    assert wilson_interval(8, 10) == pytest.approx((0.4902, 0.9433), abs=1e-4)


def test_wilson_interval_at_the_edges_stays_within_0_and_1() -> None:
    assert wilson_interval(0, 10) == pytest.approx((0.0, 0.2775), abs=1e-4)
    assert wilson_interval(10, 10) == pytest.approx((0.7225, 1.0), abs=1e-4)
    assert wilson_interval(0, 0) is None


def test_newcombe_matches_newcombe_1998_method_10() -> None:
    # Newcombe (1998), Statistics in Medicine 17:873, Table II example (a): 56/70 vs 48/80,
    # method 10 (score interval without continuity correction): 0.0524 to 0.3339.
    comparison = newcombe_difference(56, 70, 48, 80)
    assert comparison is not None
    assert comparison.difference == pytest.approx(0.2)
    assert (comparison.low, comparison.high) == pytest.approx((0.0524, 0.3339), abs=1e-4)
    assert comparison.conclusive


def test_newcombe_is_none_without_outcomes_on_a_side() -> None:
    assert newcombe_difference(5, 10, 0, 0) is None
    assert newcombe_difference(0, 0, 0, 0) is None


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


def test_lesson_effect_needs_min_tickets_on_both_sides() -> None:
    # 0/19 against 19/19 is as harmful as can be, but 19 is one short of the minimum.
    short = lesson_effect(ArmCounts(30, 19, 0), ArmCounts(30, 20, 20), min_tickets=20)
    assert short["verdict"] == "not enough data"
    assert short["ci"] is not None
    harmful = lesson_effect(ArmCounts(30, 20, 0), ArmCounts(30, 20, 20), min_tickets=20)
    assert harmful["verdict"] == "measured harmful"
    assert harmful["ci"][1] < 0
    assert harmful["shown"] == {"tickets": 30, "with_outcome": 20, "merged": 0}


def test_lesson_effect_harmful_only_when_the_whole_interval_is_below_zero() -> None:
    # 8/20 against 14/20: 30 points worse, but the interval still reaches above zero.
    unclear = lesson_effect(ArmCounts(20, 20, 8), ArmCounts(20, 20, 14))
    assert unclear["ci"][0] < 0 < unclear["ci"][1]
    assert unclear["verdict"] == "no clear effect"
    helpful = lesson_effect(ArmCounts(20, 20, 20), ArmCounts(20, 20, 0))
    assert helpful["verdict"] == "measured helpful"


def test_arm_counts_refuse_impossible_counts() -> None:
    with pytest.raises(ValueError):
        ArmCounts(5, 6, 0)
    with pytest.raises(ValueError):
        ArmCounts(5, 5, 6)
    with pytest.raises(ValueError):
        ArmCounts(5, 5, 1, [math.nan])


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


@settings(max_examples=150, deadline=None)
@given(shown=arms(), held_out=arms(), share=st.sampled_from([0.1, 0.5, 0.9]))
def test_reports_have_no_nan_and_ordered_intervals(
    shown: ArmCounts, held_out: ArmCounts, share: float
) -> None:
    report = compare(shown, held_out, held_out_share=share)
    effect = lesson_effect(shown, held_out, min_tickets=3)
    for number in _numbers(report) + _numbers(effect):
        assert number is None or (isinstance(number, int | float) and math.isfinite(number))
    for arm in report["arms"].values():
        if arm["merge_rate_ci"] is not None:
            low, high = arm["merge_rate_ci"]
            assert 0 <= low <= arm["merge_rate"] <= high <= 1
        if arm["median_hours_to_merge_ci"] is not None:
            low, high = arm["median_hours_to_merge_ci"]
            assert low <= high
    for ci in (report["difference"]["ci"], effect["ci"]):
        if ci is not None:
            assert -1 <= ci[0] <= ci[1] <= 1
    assert report["verdict"]
    assert "nan" not in report["verdict"].lower()


@settings(max_examples=50, deadline=None)
@given(sides=st.lists(st.tuples(arms(), arms()), max_size=8), minimum=st.integers(1, 10))
def test_many_lessons_at_once_match_one_at_a_time(
    sides: list[tuple[ArmCounts, ArmCounts]], minimum: int
) -> None:
    together = lesson_effects(sides, minimum)
    assert len(together) == len(sides)
    family = sum(1 for effect in together if effect["compared"] is not None)
    for (shown, held_out), effect in zip(sides, together, strict=True):
        alone = lesson_effect(shown, held_out, minimum)
        assert (effect["shown"], effect["held_out"]) == (alone["shown"], alone["held_out"])
        if alone["ci"] is None:
            assert (effect["difference"], effect["ci"], effect["p_value"]) == (None, None, None)
        else:
            assert effect["difference"] == pytest.approx(alone["difference"], abs=1e-12)
            assert effect["ci"] == pytest.approx(alone["ci"], abs=1e-12)
            assert effect["p_value"] == pytest.approx(alone["p_value"], abs=1e-12)
        if alone["verdict"] == "not enough data":
            assert effect["verdict"] == "not enough data"
            assert (effect["compared"], effect["adjusted_p_value"]) == (None, None)
            continue
        # In a family the correction can only take a claim away, never make one.
        assert effect["compared"] == family and alone["compared"] == 1
        assert alone["p_value"] <= effect["adjusted_p_value"] <= 1
        if effect["verdict"].startswith("measured"):
            assert alone["verdict"] == effect["verdict"]
        if family == 1:
            assert effect == alone


# Lessons with no effect: 30 of 60 tickets merged on each side.
NULL = (ArmCounts(60, 60, 30), ArmCounts(60, 60, 30))
# 18 of 50 merged shown against 30 of 50 held out: 24 points less, the interval below zero,
# p = 0.017 alone; among 40 lessons with no effect, about what chance gives one of them.
BY_CHANCE = (ArmCounts(50, 50, 18), ArmCounts(50, 50, 30))
# 5 of 30 against 25 of 30: harmful however many lessons are compared (p = 3e-7).
HARMFUL = (ArmCounts(30, 30, 5), ArmCounts(30, 30, 25))


def test_a_lesson_below_zero_by_chance_among_many_is_not_measured_harmful() -> None:
    sides = [NULL] * 39 + [BY_CHANCE, HARMFUL]
    *nulls, by_chance, harmful = lesson_effects(sides)
    # Its own interval is as before, wholly below zero...
    alone = newcombe_difference(18, 50, 30, 50)
    assert alone is not None
    assert by_chance["ci"] == pytest.approx([alone.low, alone.high])
    assert by_chance["ci"][1] < 0 and by_chance["p_value"] < 0.05
    # ...but Holm's correction over the 41 lessons compared does not reject it, and the
    # verdict says so instead of claiming harm.
    assert by_chance["compared"] == 41
    assert by_chance["adjusted_p_value"] > 0.05
    assert by_chance["verdict"] == (
        "no clear effect: below zero, but not after allowing for the 41 lessons compared"
    )
    assert "harmful" not in by_chance["verdict"]
    # Alone, the same counts are measured harmful: the correction is what changed.
    assert lesson_effect(*BY_CHANCE)["verdict"] == "measured harmful"
    assert harmful["verdict"] == "measured harmful"
    assert harmful["adjusted_p_value"] < 0.001
    assert {e["verdict"] for e in nulls} == {"no clear effect"}
    # The same above zero.
    helpful = (HARMFUL[1], HARMFUL[0])
    flipped = lesson_effects([NULL] * 39 + [(ArmCounts(50, 50, 32), ArmCounts(50, 50, 20))])
    assert flipped[-1]["verdict"] == (
        "no clear effect: above zero, but not after allowing for the 40 lessons compared"
    )
    assert lesson_effects([NULL] * 39 + [helpful])[-1]["verdict"] == "measured helpful"


def test_p_values_are_statsmodels_score_tests_adjusted_by_holm() -> None:
    sides = [NULL, BY_CHANCE, HARMFUL, (ArmCounts(40, 25, 20), ArmCounts(40, 22, 9))]
    effects = lesson_effects(sides)
    raw = [
        proportion.test_proportions_2indep(
            s.merged, s.with_outcome, h.merged, h.with_outcome, method="score", compare="diff"
        ).pvalue
        for s, h in sides
    ]
    _, adjusted, _, _ = multipletests(raw, alpha=0.05, method="holm")
    assert [e["p_value"] for e in effects] == pytest.approx(raw)
    assert [e["adjusted_p_value"] for e in effects] == pytest.approx(list(adjusted))
    assert {e["compared"] for e in effects} == {4}


def test_only_lessons_with_enough_data_are_compared() -> None:
    few = (ArmCounts(10, 10, 0), ArmCounts(10, 10, 10))
    effects = lesson_effects([few, NULL, HARMFUL], min_tickets=20)
    assert effects[0]["verdict"] == "not enough data"
    # Its test is there, like its interval, but it is in no family.
    assert effects[0]["p_value"] < 0.001
    assert (effects[0]["adjusted_p_value"], effects[0]["compared"]) == (None, None)
    assert [e["compared"] for e in effects[1:]] == [2, 2]


def test_both_sides_all_merged_or_none_is_p_1_not_nan() -> None:
    for merged in (0, 20):
        effect = lesson_effect(ArmCounts(20, 20, merged), ArmCounts(20, 20, merged))
        assert (effect["p_value"], effect["adjusted_p_value"]) == (1.0, 1.0)
        assert effect["verdict"] == "no clear effect"
    assert lesson_effects([]) == []


def test_effects_of_hundreds_of_lessons_form_one_family() -> None:
    rng = np.random.default_rng(0)
    sides = []
    for _ in range(500):
        n1, n2 = (int(n) for n in rng.integers(20, 400, 2))
        sides.append(
            (
                ArmCounts(n1, n1, int(rng.binomial(n1, 0.5))),
                ArmCounts(n2, n2, int(rng.binomial(n2, 0.5))),
            )
        )
    # Their speed is bench/experiment_scale.py's to measure; here, that all 500 are one family.
    effects = lesson_effects(sides)
    assert {e["compared"] for e in effects} == {500}

"""The merge-rate statistics: published worked examples, statsmodels' answers, lesson families.

Each formula is checked on fixed cases with published answers, then against statsmodels (one
vectorised call over seeded random counts; a handful of calls for Holm, whose every call runs a
``gc.collect()``). Coverage, bias and power over thousands of simulated experiments are
``bench/experiment.py``'s to measure; here a seeded simulation of modest size.
"""

from __future__ import annotations

import gc
import math
import random
import subprocess
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from statsmodels.stats import proportion
from statsmodels.stats.multitest import multipletests

from playbook.experiment.statistics import (
    ArmCounts,
    holm,
    lesson_effect,
    lesson_effects,
    newcombe_difference,
    score_p_value,
    wilson_interval,
)

# Newcombe (1998), "Two-sided confidence intervals for the single proportion", Statistics in
# Medicine 17:857, Table I, method 3 (Wilson's score interval without continuity correction).
WILSON_1998 = [
    ((81, 263), (0.2553, 0.3662)),
    ((15, 148), (0.0624, 0.1605)),
    ((0, 20), (0.0, 0.1611)),
    ((1, 29), (0.0061, 0.1718)),
]
# Newcombe (1998), "Interval estimation for the difference between independent proportions",
# Statistics in Medicine 17:873, Table II, examples (a) to (h), method 10 (the hybrid score
# interval without continuity correction).
NEWCOMBE_1998 = [
    ((56, 70, 48, 80), (0.0524, 0.3339)),
    ((9, 10, 3, 10), (0.1705, 0.8090)),
    ((6, 7, 2, 7), (0.0582, 0.8062)),
    ((5, 56, 0, 29), (-0.0381, 0.1926)),
    ((0, 10, 0, 20), (-0.1611, 0.2775)),
    ((0, 10, 0, 10), (-0.2775, 0.2775)),
    ((10, 10, 0, 20), (0.6791, 1.0)),
    ((10, 10, 0, 10), (0.6075, 1.0)),
]


@pytest.mark.parametrize(("counts", "published"), WILSON_1998)
def test_wilson_matches_newcombe_1998_table_1(
    counts: tuple[int, int], published: tuple[float, float]
) -> None:
    assert wilson_interval(*counts) == pytest.approx(published, abs=1e-4)


def test_wilson_interval_of_8_in_10() -> None:
    # By hand: (p + z²/2n ± z·sqrt(p(1-p)/n + z²/4n²)) / (1 + z²/n) with p = 0.8, z = 1.96.
    assert wilson_interval(8, 10) == pytest.approx((0.4902, 0.9433), abs=1e-4)


def test_wilson_interval_at_the_edges_stays_within_0_and_1() -> None:
    assert wilson_interval(0, 10) == pytest.approx((0.0, 0.2775), abs=1e-4)
    assert wilson_interval(10, 10) == pytest.approx((0.7225, 1.0), abs=1e-4)
    assert wilson_interval(0, 0) is None
    # Rounding puts 7/7's upper end a hair below 1; the rate must not fall outside it.
    seven = wilson_interval(7, 7)
    assert seven is not None and seven[1] == 1.0


@pytest.mark.parametrize(("counts", "published"), NEWCOMBE_1998)
def test_newcombe_matches_newcombe_1998_method_10(
    counts: tuple[int, int, int, int], published: tuple[float, float]
) -> None:
    m1, n1, m2, n2 = counts
    comparison = newcombe_difference(*counts)
    assert comparison is not None
    assert comparison.difference == pytest.approx(m1 / n1 - m2 / n2)
    assert (comparison.low, comparison.high) == pytest.approx(published, abs=1e-4)
    assert comparison.conclusive == (published[0] > 0 or published[1] < 0)


def test_newcombe_is_none_without_outcomes_on_a_side() -> None:
    assert newcombe_difference(5, 10, 0, 0) is None
    assert newcombe_difference(0, 0, 0, 0) is None


def _n_minus_1_chi_square_p(m1: int, n1: int, m2: int, n2: int) -> float:
    """The 2x2 table's Pearson chi-square, N(ad - bc)² / (r1 r2 c1 c2), times (N - 1)/N (the
    "N - 1" chi-square, Campbell 2007), read off the chi-square of 1 degree of freedom."""
    a, b, c, d = m1, n1 - m1, m2, n2 - m2
    total = n1 + n2
    pearson = total * (a * d - b * c) ** 2 / (n1 * n2 * (a + c) * (b + d))
    return math.erfc(math.sqrt(pearson * (total - 1) / total / 2))


@pytest.mark.parametrize(
    "counts", [(56, 70, 48, 80), (9, 10, 3, 10), (6, 7, 2, 7), (5, 56, 0, 29), (18, 50, 30, 50)]
)
def test_the_score_test_is_the_n_minus_1_chi_square(counts: tuple[int, int, int, int]) -> None:
    assert score_p_value(*counts) == pytest.approx(_n_minus_1_chi_square_p(*counts), rel=1e-12)


def test_the_score_test_of_56_in_70_against_48_in_80() -> None:
    # By hand: X² = 150 * 1,120² / (70 * 80 * 104 * 46) = 7.0235, times 149/150 = 6.9767,
    # whose chi-square tail (1 degree of freedom) is 0.00826.
    assert score_p_value(56, 70, 48, 80) == pytest.approx(0.00826, abs=1e-5)


def test_the_score_test_is_symmetric_and_1_without_a_difference() -> None:
    assert score_p_value(18, 50, 30, 50) == score_p_value(30, 50, 18, 50)
    assert score_p_value(10, 20, 20, 40) == 1.0
    # Both sides all merged, or none: no variance, no difference, p is 1 (not NaN).
    assert score_p_value(20, 20, 7, 7) == 1.0
    assert score_p_value(0, 20, 0, 7) == 1.0
    # Far in the tails the p-value stays a positive number, not 0.
    assert 0 < score_p_value(0, 200, 200, 200) < 1e-80


def test_holm_on_a_hand_computed_family() -> None:
    # Sorted: 0.005 * 4 = 0.02, 0.01 * 3 = 0.03, 0.03 * 2 = 0.06, 0.04 * 1 = 0.04 -> 0.06 (the
    # largest so far). Rejections stop at 0.03 > 0.05 / 2.
    assert holm([0.01, 0.04, 0.03, 0.005]) == [
        (pytest.approx(0.03), True),
        (pytest.approx(0.06), False),
        (pytest.approx(0.06), False),
        (pytest.approx(0.02), True),
    ]
    assert holm([0.6, 0.7]) == [(1.0, False), (1.0, False)]  # capped at 1
    assert holm([0.04]) == [(0.04, True)]
    assert holm([]) == []


def _p_value_families() -> list[list[float]]:
    """Seeded families of p-values: uniform, tiny, exactly 1, tied, and on the thresholds."""
    rng = np.random.default_rng(39)
    families: list[list[float]] = [
        [0.05 / 4, 0.05 / 3, 0.05 / 2, 0.05],  # each exactly at its step's threshold
        [0.01, 0.01, 0.01, 0.02, 0.02, 1.0, 1.0],
    ]
    for size in (1, 2, 3, 12, 150, 1_000):
        p = rng.uniform(size=size) ** rng.choice([1, 4, 12])
        p[rng.uniform(size=size) < 0.2] = 1.0
        # Ties: a fifth of them repeat another p-value of the family.
        repeat = rng.uniform(size=size) < 0.2
        p[repeat] = rng.choice(p, size=int(repeat.sum()))
        families.append(p.tolist())
    return families


@contextmanager
def _heap_frozen() -> Iterator[None]:
    """Every object made so far left out of garbage collections until the block ends."""
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


def _statsmodels_holm(p_values: Sequence[float]) -> tuple[list[bool], list[float]]:
    """statsmodels' Holm: which p-values it rejects at 5%, and their adjusted values."""
    # Its every call ends with gc.collect(), which walks the whole heap: seconds in a large
    # test process, a fraction of a millisecond with the heap frozen.
    with _heap_frozen():
        rejected, corrected, _, _ = multipletests(p_values, alpha=0.05, method="holm")
    return rejected.tolist(), corrected.tolist()


def test_holm_agrees_with_statsmodels_multipletests() -> None:
    for p_values in _p_value_families():
        rejected, corrected = _statsmodels_holm(p_values)
        ours = holm(p_values, alpha=0.05)
        assert [q for q, _ in ours] == pytest.approx(corrected, abs=1e-12)
        assert [r for _, r in ours] == rejected


def _random_counts(seed: int, cases: int) -> list[tuple[int, int, int, int]]:
    """Seeded counts m1, n1, m2, n2 (both n at least 1): tiny and large, 0% and 100% often."""
    rng = random.Random(seed)
    found = []
    for _ in range(cases):
        row = []
        for _side in range(2):
            n = rng.choice([rng.randint(1, 12), rng.randint(1, 200), rng.randint(1, 100_000)])
            row += [rng.choice([0, n, rng.randint(0, n)]), n]
        found.append((row[0], row[1], row[2], row[3]))
    return found


def test_wilson_newcombe_and_the_score_test_agree_with_statsmodels() -> None:
    cases = _random_counts(seed=7, cases=3_000)
    m1, n1, m2, n2 = (np.array(column) for column in zip(*cases, strict=True))
    wilson = np.column_stack(proportion.proportion_confint(m1, n1, alpha=0.05, method="wilson"))
    newcombe = np.column_stack(
        proportion.confint_proportions_2indep(m1, n1, m2, n2, method="newcomb", compare="diff")
    )
    with np.errstate(divide="ignore", invalid="ignore"):
        tested = proportion.test_proportions_2indep(
            m1, n1, m2, n2, method="score", compare="diff", alternative="two-sided"
        ).pvalue
    for i, case in enumerate(cases):
        assert wilson_interval(case[0], case[1]) == pytest.approx(tuple(wilson[i]), abs=1e-12)
        comparison = newcombe_difference(*case)
        assert comparison is not None
        assert (comparison.low, comparison.high) == pytest.approx(tuple(newcombe[i]), abs=1e-12)
        # statsmodels' NaN is the case of no variance: both sides 0% or both 100%.
        expected = 1.0 if math.isnan(tested[i]) else float(tested[i])
        assert score_p_value(*case) == pytest.approx(expected, abs=1e-12)


def test_every_small_case_has_ordered_intervals_and_p_values() -> None:
    # Every pair of counts up to 12 tickets a side, the empty ones included: what a property
    # test drew at random, in full (8,281 cases: no NaN, nothing out of bounds).
    for n1 in range(13):
        for m1 in range(n1 + 1):
            own = wilson_interval(m1, n1)
            if own is not None:
                assert 0 <= own[0] <= m1 / n1 <= own[1] <= 1
            for n2 in range(13):
                for m2 in range(n2 + 1):
                    effect = lesson_effect(ArmCounts(n1, n1, m1), ArmCounts(n2, n2, m2), 3)
                    if effect["ci"] is None:
                        assert min(n1, n2) == 0 and effect["p_value"] is None
                        assert effect["verdict"] == "not enough data"
                        continue
                    low, high = effect["ci"]
                    assert -1 <= low <= effect["difference"] <= high <= 1
                    assert 0 <= effect["p_value"] <= 1
                    if effect["adjusted_p_value"] is not None:
                        assert effect["adjusted_p_value"] == effect["p_value"]
                    assert effect["verdict"]


def test_newcombe_covers_the_true_difference_in_a_seeded_simulation() -> None:
    # 2,000 lessons of 60% against 50% with 100 tickets a side: a 95% interval misses about
    # 100 of them (binomial sd 10; this seed gives 113). bench/experiment.py measures coverage
    # at scale.
    rng = np.random.default_rng(3)
    shown, held_out = rng.binomial(100, 0.6, 2_000), rng.binomial(100, 0.5, 2_000)
    missed = 0
    for m1, m2 in zip(shown.tolist(), held_out.tolist(), strict=True):
        comparison = newcombe_difference(m1, 100, m2, 100)
        assert comparison is not None
        missed += not comparison.low <= 0.1 <= comparison.high
    assert 60 <= missed <= 140


def test_holm_holds_false_calls_in_a_seeded_a_a_simulation() -> None:
    # 200 families of 50 lessons with no effect: Holm lets a false call into about 5% of
    # families (10 of 200, binomial sd 3; this seed gives 15); testing each lesson alone at
    # 5% calls about 500 lessons (498), some in almost every family.
    rng = np.random.default_rng(11)
    families_with_a_call = lessons_called_alone = 0
    for _ in range(200):
        sides = [
            (ArmCounts(80, 80, int(a)), ArmCounts(80, 80, int(b)))
            for a, b in zip(rng.binomial(80, 0.5, 50), rng.binomial(80, 0.5, 50), strict=True)
        ]
        effects = lesson_effects(sides)
        families_with_a_call += any(e["verdict"].startswith("measured") for e in effects)
        lessons_called_alone += sum(e["p_value"] < 0.05 for e in effects)
    assert families_with_a_call <= 20
    assert lessons_called_alone > 200


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


def test_a_lone_lesson_whose_interval_and_test_disagree_claims_nothing() -> None:
    # 0 of 1 against 3 of 3: Wilson gives (0, 0.7935) and (0.4385, 1), so Newcombe's upper
    # end is -1 + sqrt(0.5615² + 0.7935²) = -0.028, below zero; the score test's pooled 3/4
    # gives z² = 1 / (0.1875 * 4/3 * 4/3) = 3 and p = 0.083.
    effect = lesson_effect(ArmCounts(1, 1, 0), ArmCounts(3, 3, 3), min_tickets=1)
    assert effect["ci"] == pytest.approx([-1.0, -0.0280], abs=1e-4)
    assert effect["p_value"] == pytest.approx(0.0833, abs=1e-4)
    assert effect["verdict"] == (
        "no clear effect: below zero, but not by the test of the difference (p = 0.08)"
    )


def test_arm_counts_refuse_impossible_counts() -> None:
    with pytest.raises(ValueError):
        ArmCounts(5, 6, 0)
    with pytest.raises(ValueError):
        ArmCounts(5, 5, 6)
    with pytest.raises(ValueError):
        ArmCounts(5, 5, 1, [math.nan])
    with pytest.raises(ValueError):
        ArmCounts(5, 5, 1, [], [-1])


@st.composite
def arms(draw: st.DrawFn) -> ArmCounts:
    """An arm with few tickets, so empty arms and 0% and 100% rates come up often."""
    tickets = draw(st.integers(0, 30))
    with_outcome = draw(st.integers(0, tickets))
    merged = draw(st.integers(0, with_outcome))
    return ArmCounts(tickets, with_outcome, merged)


@settings(max_examples=100, deadline=None)
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
    _, adjusted = _statsmodels_holm(raw)
    assert [e["p_value"] for e in effects] == pytest.approx(raw)
    assert [e["adjusted_p_value"] for e in effects] == pytest.approx(adjusted)
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


def test_reading_a_lesson_s_effect_imports_no_scipy_statsmodels_or_pandas() -> None:
    # `show`, a lesson read over MCP or HTTP and the web page's lesson page import the report
    # to read one lesson's effect; scipy, statsmodels and pandas would cost them a second.
    code = (
        "import sys\n"
        "from playbook.experiment import report\n"
        "from playbook.experiment.statistics import ArmCounts, lesson_effect\n"
        "lesson_effect(ArmCounts(30, 30, 5), ArmCounts(30, 30, 25))\n"
        "heavy = {'scipy', 'statsmodels', 'pandas'}\n"
        "print(sorted({m.split('.')[0] for m in sys.modules} & heavy))\n"
    )
    found = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    assert found.stdout.strip() == "[]"

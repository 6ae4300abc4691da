"""The ranking formulas, pinned with worked numbers."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from playbook.search.ranking import confidence, feedback_multiplier, freshness

NOW = datetime(2026, 11, 22, tzinfo=UTC)


@pytest.mark.parametrize(
    ("successes", "failures", "expected"),
    [
        (0, 0, 1.0),
        (1, 0, 2**0.52),  # 1.434: one success nudges up
        (0, 1, 2**-0.52),  # 0.697: one failure nudges down
        (5, 0, 2.0),
        (0, 5, 0.5),
        (9, 0, 2.0),  # capped at five ratings
        (3, 1, 2 ** (0.5 * (0.4 + 0.6 * 4 / 5))),  # 1.346
        (2, 2, 1.0),
    ],
)
def test_feedback_multiplier(successes: int, failures: int, expected: float) -> None:
    assert feedback_multiplier(successes, failures) == pytest.approx(expected)


def test_one_rating_nudges_as_documented() -> None:
    assert round(feedback_multiplier(1, 0), 2) == 1.43
    assert round(feedback_multiplier(0, 1), 2) == 0.70


def test_confidence_is_the_beta_posterior_mean_of_merged_over_rated_cites() -> None:
    assert confidence(0) == 0.5  # an unused lesson: the prior
    assert confidence(1) == pytest.approx(2 / 3)
    assert confidence(5) == pytest.approx(6 / 7)
    assert confidence(0, 1) == pytest.approx(1 / 3)
    assert confidence(1, 1) == 0.5
    assert confidence(20, 10) == pytest.approx(21 / 32)  # 0.656


def test_a_lesson_that_helps_more_often_than_not_beats_an_unused_one() -> None:
    # The case that used to read 0.10 against an unused lesson's 0.70.
    assert confidence(20, 10) > confidence(0, 0)
    assert confidence(0, 0) > confidence(10, 20)
    assert feedback_multiplier(20, 10) > feedback_multiplier(0, 0) > feedback_multiplier(10, 20)


COUNTS = range(61)


def test_more_merged_cites_never_lower_and_more_rejected_never_raise() -> None:
    for successes in COUNTS:
        for failures in COUNTS:
            here = (confidence(successes, failures), feedback_multiplier(successes, failures))
            helped = (
                confidence(successes + 1, failures),
                feedback_multiplier(successes + 1, failures),
            )
            hurt = (
                confidence(successes, failures + 1),
                feedback_multiplier(successes, failures + 1),
            )
            assert helped[0] > here[0] > hurt[0], (successes, failures)
            assert helped[1] >= here[1] >= hurt[1], (successes, failures)


def test_confidence_and_multiplier_agree_on_which_lessons_help() -> None:
    for successes in COUNTS:
        for failures in COUNTS:
            helps = successes > failures
            hurts = successes < failures
            assert (confidence(successes, failures) > 0.5) is helps
            assert (confidence(successes, failures) < 0.5) is hurts
            assert (feedback_multiplier(successes, failures) > 1) is helps
            assert (feedback_multiplier(successes, failures) < 1) is hurts


def test_confidence_does_not_fade_so_a_new_success_never_lowers_it() -> None:
    # Fading all evidence by the time since the last use would let one new success bring
    # ten old rejections back in full (from about 0.5 to 0.15). Without fading, another
    # success always means more confidence, however long the lesson was idle.
    old = confidence(0, 10, last_used_at=NOW - timedelta(days=365), now=NOW)
    assert old == pytest.approx(1 / 12)
    assert confidence(1, 10, last_used_at=NOW, now=NOW) > old
    assert confidence(5, last_used_at=NOW - timedelta(days=28), now=NOW, half_life_days=14) == (
        confidence(5)
    )


def test_freshness_fades_an_idle_lesson_toward_half() -> None:
    assert freshness(NOW, NOW) == 1.0
    assert freshness(None, NOW) == 1.0
    assert freshness(NOW - timedelta(days=180), NOW) == pytest.approx(0.75)
    assert freshness(NOW - timedelta(days=360), NOW) == pytest.approx(0.625)
    assert freshness(NOW - timedelta(days=3650), NOW) == pytest.approx(0.5, abs=1e-4)
    assert freshness(NOW - timedelta(days=3650), NOW, half_life_days=None) == 1.0
    assert freshness(NOW + timedelta(days=1), NOW) == 1.0  # ahead of the clock: now

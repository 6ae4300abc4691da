"""The ranking formulas, pinned with worked numbers."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from playbook.ranking import confidence, feedback_multiplier, freshness

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


def test_confidence_reinforcement() -> None:
    assert confidence(0) == pytest.approx(0.7)
    assert confidence(1) == pytest.approx(0.73)
    assert confidence(2) == pytest.approx(0.757)
    assert confidence(5) == pytest.approx(0.822853)
    assert confidence(5) > 0.82


def test_confidence_penalty() -> None:
    assert confidence(0, 1) == pytest.approx(0.56)
    assert confidence(1, 1) == pytest.approx(0.584)
    assert confidence(0, 3) == pytest.approx(0.3584)


def test_confidence_decays_toward_the_prior_when_unused() -> None:
    fresh = confidence(5, last_used_at=NOW, now=NOW)
    two_weeks = confidence(5, last_used_at=NOW - timedelta(days=14), now=NOW)
    four_weeks = confidence(5, last_used_at=NOW - timedelta(days=28), now=NOW)
    assert fresh == pytest.approx(0.822853)
    assert two_weeks == pytest.approx(0.7 + 0.122853 / 2)
    assert four_weeks == pytest.approx(0.7 + 0.122853 / 4)
    failed = confidence(0, 1, last_used_at=NOW - timedelta(days=14), now=NOW)
    assert failed == pytest.approx(0.63)  # 0.56 halfway back to 0.7
    assert confidence(5, last_used_at=NOW - timedelta(days=14), now=NOW, half_life_days=None) == (
        pytest.approx(0.822853)
    )


def test_freshness_fades_an_idle_lesson_toward_half() -> None:
    assert freshness(NOW, NOW) == 1.0
    assert freshness(None, NOW) == 1.0
    assert freshness(NOW - timedelta(days=180), NOW) == pytest.approx(0.75)
    assert freshness(NOW - timedelta(days=360), NOW) == pytest.approx(0.625)
    assert freshness(NOW - timedelta(days=3650), NOW) == pytest.approx(0.5, abs=1e-4)
    assert freshness(NOW - timedelta(days=3650), NOW, half_life_days=None) == 1.0
    assert freshness(NOW + timedelta(days=1), NOW) == 1.0  # ahead of the clock: now

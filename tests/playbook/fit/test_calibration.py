"""The per-scope recalibration: the maximum-likelihood shift, its bounds, and what counts."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest
from sqlalchemy import Engine, select

from playbook import db
from playbook.fit import calibration
from playbook.fit.calibration import (
    MAX_SHIFT,
    MIN_LABELS,
    PRIOR_SD,
    LabelRow,
    evidence,
    fitted_shift,
)
from playbook.models import Bullet, FitCalibration, FitLabel
from playbook.search.calibration import shift as calibration_shift
from playbook.search.relevance import shifted
from tests.playbook.fit.world import NOW, commented, lessons, react, reply


def glm_shift(pairs: list[tuple[float, bool]]) -> float:
    """statsmodels' answer: a Binomial GLM with only an intercept, the logits as offset."""
    import statsmodels.api as sm

    offsets = np.array([math.log(p / (1 - p)) for p, _ in pairs])
    ys = np.array([1.0 if y else 0.0 for _, y in pairs])
    fit = sm.GLM(ys, np.ones((len(ys), 1)), family=sm.families.Binomial(), offset=offsets).fit()
    return float(fit.params[0])


def random_pairs(rng: random.Random, n: int, true_shift: float) -> list[tuple[float, bool]]:
    """Estimates spread like the model's (mostly small) and outcomes drawn at ``true_shift``."""
    pairs = []
    for _ in range(n):
        p = min(max(rng.betavariate(0.6, 6.0), 1e-4), 1 - 1e-4)
        pairs.append((p, rng.random() < shifted(p, true_shift)))
    return pairs


@pytest.mark.parametrize("case", range(40))
def test_the_shift_is_statsmodels_glm_with_offset_clipped_to_the_bounds(case: int) -> None:
    rng = random.Random(case)
    pairs: list[tuple[float, bool]] = []
    while len({y for _, y in pairs}) < 2:  # unanimous verdicts have no finite optimum to compare
        pairs = random_pairs(rng, rng.choice([50, 120, 400]), rng.uniform(-2.5, 2.5))
    expected = glm_shift(pairs)
    assert fitted_shift(pairs, prior_sd=None) == pytest.approx(
        max(-MAX_SHIFT, min(MAX_SHIFT, expected)), abs=1e-6
    )


def minus_log_posterior(
    pairs: list[tuple[float, bool]], groups: list[list[float]], prior_sd: float | None
):
    """The objective written out term by term, for scipy to minimise."""

    def objective(s: float) -> float:
        total = sum(math.log(shifted(p, s)) if y else math.log(1 - shifted(p, s)) for p, y in pairs)
        total += sum(math.log(1 - math.prod(1 - shifted(p, s) for p in g)) for g in groups)
        if prior_sd is not None:
            total -= s * s / (2 * prior_sd * prior_sd)
        return -total

    return objective


@pytest.mark.parametrize("case", range(10))
def test_with_the_prior_the_shift_is_the_most_probable_one(case: int) -> None:
    from scipy.optimize import minimize_scalar

    rng = random.Random(100 + case)
    pairs = random_pairs(rng, rng.choice([50, 200]), rng.uniform(-2, 2))
    best = minimize_scalar(
        minus_log_posterior(pairs, [], PRIOR_SD), bounds=(-MAX_SHIFT, MAX_SHIFT), method="bounded"
    )
    assert fitted_shift(pairs) == pytest.approx(best.x, abs=1e-4)


def test_the_prior_yields_to_evidence() -> None:
    """Fifty 👎'd lessons move the level less far than the likelihood alone would; thousands
    of verdicts move it as far."""
    rng = random.Random(3)
    few = [(0.04, False)] * 50
    assert -MAX_SHIFT < fitted_shift(few) < 0 and fitted_shift(few, prior_sd=None) == -MAX_SHIFT
    many = random_pairs(rng, 4000, -0.8)
    assert fitted_shift(many) == pytest.approx(fitted_shift(many, prior_sd=None), abs=0.05)
    assert fitted_shift(many) == pytest.approx(-0.8, abs=0.25)


def test_a_liked_comment_says_one_of_its_lessons_fitted_not_all() -> None:
    """The 👍 term is the likelihood of "not all missed", maximised as scipy would."""
    from scipy.optimize import minimize_scalar

    rng = random.Random(7)
    pairs = random_pairs(rng, 80, 0.0)
    groups = [[rng.uniform(0.01, 0.3) for _ in range(rng.randint(1, 5))] for _ in range(15)]

    for prior_sd in (None, PRIOR_SD):
        best = minimize_scalar(
            minus_log_posterior(pairs, groups, prior_sd),
            bounds=(-MAX_SHIFT, MAX_SHIFT),
            method="bounded",
        )
        assert fitted_shift(pairs, groups, prior_sd) == pytest.approx(best.x, abs=1e-4)
    # Read as five helpful pairs each instead, the same 👍s would move the level far more.
    as_pairs = pairs + [(p, True) for g in groups for p in g]
    assert fitted_shift(as_pairs, prior_sd=None) > fitted_shift(pairs, groups, None) + 0.3


@pytest.mark.parametrize("helpful", [True, False])
def test_unanimous_verdicts_stay_finite_at_the_bound(helpful: bool) -> None:
    pairs = [(p, helpful) for p in (1e-9, 0.001, 0.03, 0.5, 0.97, 1.0 - 1e-12, 0.0, 1.0)] * 10
    groups = [[0.2, 0.01]] * 5 if helpful else []
    shift = fitted_shift(pairs, groups, prior_sd=None)
    assert math.isfinite(shift)
    assert shift == (MAX_SHIFT if helpful else -MAX_SHIFT)
    # With the prior: finite, inside the bounds, and the way the verdicts point.
    for many in (1, 100):
        shift = fitted_shift(pairs * many, groups * many)
        assert math.isfinite(shift) and -MAX_SHIFT <= shift <= MAX_SHIFT
        assert (shift > 0) == helpful


def test_no_verdicts_no_shift() -> None:
    assert fitted_shift([]) == 0.0
    assert fitted_shift([], [[]]) == 0.0


def test_a_reply_replaces_the_same_persons_reaction_and_verdicts_without_an_estimate_do_not_count():
    rows = [
        # ana 👎 the comment on T-1, then said pb-1 of it did help: pb-1 is hers by reply.
        LabelRow("T-1", "pb-1", "ana", "reaction", False, 0.2),
        LabelRow("T-1", "pb-2", "ana", "reaction", False, 0.1),
        LabelRow("T-1", "pb-1", "ana", "command", True, 0.2),
        # bob 👍 T-1 and replied pb-2 helped: the 👍 is already said by the reply.
        LabelRow("T-1", "pb-1", "bob", "reaction", True, 0.2),
        LabelRow("T-1", "pb-2", "bob", "reaction", True, 0.1),
        LabelRow("T-1", "pb-2", "bob", "command", True, 0.1),
        # cy 👍 T-2: one group of two.
        LabelRow("T-2", "pb-1", "cy", "reaction", True, 0.05),
        LabelRow("T-2", "pb-3", "cy", "reaction", True, 0.02),
        # A reply about a lesson the bot did not show (no estimate): not evidence of its level.
        LabelRow("T-3", "pb-4", "ana", "command", False, None),
    ]
    found = evidence(rows)
    assert sorted(found.pairs) == [(0.1, False), (0.1, True), (0.2, True)]
    assert found.groups == [[0.05, 0.02]]
    assert (found.labels, found.helpful) == (5, 4)


def test_below_min_labels_the_scope_keeps_the_packaged_model(engine: Engine) -> None:
    ids = lessons(engine)
    for n in range(MIN_LABELS - 1):
        commented(engine, f"acme/api#{n}", [(ids[2], 0.04)])
        reply(engine, f"acme/api#{n}", ids[2], helpful=False)
    with db.transaction(engine) as session:
        assert calibration.refit(session, "acme/api") is None
        assert calibration_shift(session, "acme/api") == 0.0
    commented(engine, "acme/api#99", [(ids[2], 0.04)])
    reply(engine, "acme/api#99", ids[2], helpful=False)
    with db.transaction(engine) as session:
        row = calibration.refit(session, "acme/api")
        assert row is not None and (row.labels, row.helpful) == (MIN_LABELS, 0)
        assert row.shift == pytest.approx(fitted_shift([(0.04, False)] * MIN_LABELS))
        assert -MAX_SHIFT < row.shift < 0
        assert calibration_shift(session, "acme/api") == row.shift
    # A verdict withdrawn takes the scope back under the bar: the calibration goes.
    with db.transaction(engine) as session:
        session.delete(session.scalars(select(FitLabel).limit(1)).one())
        assert calibration.refit(session, "acme/api") is None
        assert session.get(FitCalibration, "acme/api") is None


def test_verdicts_on_lessons_not_shown_do_not_reach_the_bar(engine: Engine) -> None:
    ids = lessons(engine)
    for n in range(MIN_LABELS + 10):
        reply(engine, f"acme/api#{n}", ids[2], helpful=False)  # no comment: no estimate
    with db.transaction(engine) as session:
        assert session.scalar(select(FitLabel.relevance).limit(1)) is None
        assert calibration.refit(session, "acme/api") is None


def test_a_thumbs_down_counts_for_every_lesson_the_comment_showed(engine: Engine) -> None:
    ids = lessons(engine)
    shown = [(ids[2], 0.05), (ids[4], 0.03), (ids[5], 0.02), (ids[0], 0.02), (ids[1], 0.01)]
    for n in range(10):
        commented(engine, f"acme/api#{n}", shown)
        react(engine, f"acme/api#{n}", [b for b, _ in shown], {"ana": False})
    with db.transaction(engine) as session:
        row = calibration.refit(session, "acme/api")
        assert row is not None and row.labels == 50
        estimates = [p for _, p in shown] * 10
        assert row.shift == pytest.approx(fitted_shift([(p, False) for p in estimates]))


def test_feedback_never_changes_a_lesson(engine: Engine) -> None:
    ids = lessons(engine)

    def lesson_state() -> list[tuple]:
        with db.transaction(engine) as session:
            return [
                (b.status, b.cites_success, b.cites_failure, b.ratings, b.rating_sum, b.updated_at)
                for b in session.scalars(select(Bullet).order_by(Bullet.id))
            ]

    before = lesson_state()
    for n in range(60):
        commented(engine, f"acme/api#{n}", [(ids[2], 0.2), (ids[4], 0.1)])
        react(engine, f"acme/api#{n}", [ids[2], ids[4]], {"ana": n % 3 == 0, "bob": False})
        reply(engine, f"acme/api#{n}", ids[4], helpful=False, actor="cy", reason="not ours")
    with db.transaction(engine) as session:
        assert calibration.refit(session, "acme/api") is not None
    assert lesson_state() == before


def test_a_verdict_keeps_the_packaged_estimate_behind_what_the_scope_was_shown(
    engine: Engine,
) -> None:
    """The fit is of the packaged model: a shown estimate already shifted is shifted back, and
    reading the same reaction again after a refit does not move it."""
    ids = lessons(engine)
    with db.transaction(engine) as session:
        session.add(
            FitCalibration(scope="acme/api", labels=60, helpful=3, shift=-1.0, fitted_at=NOW)
        )
    commented(engine, "acme/api#1", [(ids[2], 0.1)])
    react(engine, "acme/api#1", [ids[2]], {"ana": False})
    packaged = shifted(0.1, 1.0)
    with db.transaction(engine) as session:
        assert session.scalar(select(FitLabel.relevance)) == pytest.approx(packaged)
        session.get(FitCalibration, "acme/api").shift = -0.5
    react(engine, "acme/api#1", [ids[2]], {"ana": True})  # changed her mind, read after a refit
    with db.transaction(engine) as session:
        label = session.scalars(select(FitLabel)).one()
        assert label.helpful and label.relevance == pytest.approx(packaged)


def test_refit_all_covers_every_labelled_scope(engine: Engine) -> None:
    ids = lessons(engine)
    for n in range(MIN_LABELS):
        commented(engine, f"acme/api#{n}", [(ids[2], 0.5)])
        reply(engine, f"acme/api#{n}", ids[2], helpful=n % 2 == 0)
    reply(engine, "other/web#1", ids[3], helpful=True)
    with db.transaction(engine) as session:
        fitted = calibration.refit_all(session)
    assert set(fitted) == {"acme/api", "other/web"}
    assert fitted["other/web"] is None
    assert fitted["acme/api"] is not None and abs(fitted["acme/api"].shift) < 0.05

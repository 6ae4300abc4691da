"""A scope's recalibration of the relevance estimate from its people's verdicts, within bounds.

What is learned is one number per scope: a shift of the estimate's log-odds (its intercept),
fitted to the scope's verdicts with the packaged model's estimate as the offset (the most
probable shift under a mild prior centred on no shift), within ±MAX_SHIFT. One parameter
cannot overturn the model's ranking of lessons; it moves the level, so a team whose tickets
the model over- or under-rates gets comments as often as they deserve.

How the verdicts weigh, each person's verdicts counted separately:
- A reply about one lesson (``/playbook helpful|unhelpful pb-3``) is one labelled pair.
- A 👎 on the comment says none of its lessons fitted: one unhelpful pair per lesson shown.
- A 👍 on the comment says *at least one* of its lessons fitted, not which: it is one term,
  the probability that not all of them missed. Counting it as "every lesson fitted" would
  teach that five lessons fit where one did, and raise the level for every ticket.
- A person's reply about a lesson replaces their reaction for that lesson (it names the
  lesson); a 👍 of someone who also replied that a lesson of the comment helped is already
  said by the reply and is not counted again.
- A verdict without an estimate (a lesson the bot's comment did not show, or shown before
  estimates were kept) says nothing about the estimate's level: it is left out.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime

import numpy as np
from sqlalchemy import select
from sqlalchemy.orm import Session

from playbook import clock
from playbook.fit.labels import COMMAND, REACTION
from playbook.models import FitCalibration, FitLabel
from playbook.search import calibration as cached

# Below this many labelled pairs with an estimate, a scope keeps the packaged model as is.
MIN_LABELS = 50
# The most a scope's verdicts move the estimate's log-odds either way (x/÷ 4 in odds): a
# team's few dozen labels can correct the model's level for its tickets, not overturn it.
MAX_SHIFT = math.log(4.0)
# The shift's prior: normal around 0 (the packaged model, fitted on 40,000 pairs, holds until a
# team shows otherwise) with this spread, worth about ten 👎'd five-lesson comments. Where good
# comments are rare, a scope's first 50 verdicts are often all 👎: the likelihood alone threw
# such a scope to the lower bound at once and its comments fell by three fifths for a thousand
# tickets (bench/feedback_replay.py); with the prior the level moves as the evidence grows.
PRIOR_SD = 1.0
# Estimates are kept away from 0 and 1 so every log-odds is finite (±13.8).
_EPS = 1e-6
# exp() of more than this overflows a float; a sum of softplus terms this large means a 👍'd
# comment was all but certain to hold a fit, and its term's gradient is 0 to float precision.
_MAX_EXP = 700.0


@dataclass(frozen=True)
class LabelRow:
    """A verdict as the fit reads it (a `FitLabel` row's columns)."""

    ticket_key: str
    bullet_id: str
    actor: str
    source: str
    helpful: bool
    relevance: float | None


@dataclass(frozen=True)
class Evidence:
    """What a scope's verdicts say about the estimate's level."""

    # (estimate, fitted): a reply about one lesson, or a lesson of a 👎'd comment.
    pairs: list[tuple[float, bool]] = field(default_factory=list)
    # The estimates of a 👍'd comment's lessons: at least one of them fitted.
    groups: list[list[float]] = field(default_factory=list)

    @property
    def labels(self) -> int:
        """The labelled (ticket, lesson) verdicts used, a 👍'd comment's lessons each."""
        return len(self.pairs) + sum(len(g) for g in self.groups)

    @property
    def helpful(self) -> int:
        """Of those, the ones saying the lesson (or its comment) helped."""
        return sum(1 for _, y in self.pairs if y) + sum(len(g) for g in self.groups)


def evidence(rows: Iterable[LabelRow]) -> Evidence:
    """The pairs and 👍 groups the fit uses, by the rules in this module's docstring. Pure."""
    rows = list(rows)
    replied = {(r.ticket_key, r.actor, r.bullet_id) for r in rows if r.source == COMMAND}
    replied_helpful = {(r.ticket_key, r.actor) for r in rows if r.source == COMMAND and r.helpful}
    pairs: list[tuple[float, bool]] = []
    reactions: dict[tuple[str, str], list[LabelRow]] = defaultdict(list)
    for row in rows:
        if row.source == COMMAND:
            if row.relevance is not None:
                pairs.append((_bounded(row.relevance), row.helpful))
        elif row.source == REACTION and (row.ticket_key, row.actor, row.bullet_id) not in replied:
            reactions[(row.ticket_key, row.actor)].append(row)
    groups: list[list[float]] = []
    for (ticket_key, actor), comment in sorted(reactions.items()):
        estimates = [_bounded(r.relevance) for r in comment if r.relevance is not None]
        if not estimates:
            continue
        # One person's reaction is one emoji on the whole comment: its rows agree.
        if comment[0].helpful:
            if (ticket_key, actor) not in replied_helpful:
                groups.append(estimates)
        else:
            pairs.extend((p, False) for p in estimates)
    return Evidence(pairs, groups)


def _bounded(p: float) -> float:
    return min(max(float(p), _EPS), 1.0 - _EPS)


def _logit(ps: Sequence[float]) -> np.ndarray:
    p = np.asarray(ps, dtype=float)
    return np.log(p) - np.log1p(-p)


def _sigmoid(z: np.ndarray) -> np.ndarray:
    # The tanh form stays finite and exact at either extreme, with no overflow warning.
    return 0.5 * (1.0 + np.tanh(0.5 * z))


class _Likelihood:
    """The log-posterior's gradient and curvature in the shift, vectorised over the labels."""

    def __init__(
        self,
        pairs: Sequence[tuple[float, bool]],
        groups: Sequence[Sequence[float]],
        prior_sd: float | None,
    ):
        self.precision = 0.0 if prior_sd is None else 1.0 / (prior_sd * prior_sd)
        self.offsets = _logit([p for p, _ in pairs])
        self.ys = np.asarray([1.0 if y else 0.0 for _, y in pairs])
        flat = [p for g in groups for p in g]
        self.group_offsets = _logit(flat)
        self.group_of = np.repeat(np.arange(len(groups)), [len(g) for g in groups])
        self.n_groups = len(groups)

    def slope(self, shift: float) -> tuple[float, float]:
        """d/ds of the log-posterior, and its curvature (minus the second derivative)."""
        q = _sigmoid(self.offsets + shift)
        gradient = float(np.sum(self.ys - q)) - self.precision * shift
        curvature = float(np.sum(q * (1.0 - q))) + self.precision
        if self.n_groups:
            # log(1 - prod(1 - q_i)): with g = sum softplus(o_i + s), prod(1 - q_i) = exp(-g),
            # whose derivative is written with expm1 to stay exact for small and large g.
            z = self.group_offsets + shift
            qs = _sigmoid(z)
            g = np.minimum(
                np.bincount(self.group_of, np.logaddexp(0.0, z), self.n_groups), _MAX_EXP
            )
            s1 = np.bincount(self.group_of, qs, self.n_groups)
            s2 = np.bincount(self.group_of, qs * (1.0 - qs), self.n_groups)
            up = np.expm1(g)
            gradient += float(np.sum(s1 / up))
            curvature += float(np.sum(s1 * s1 / (up * -np.expm1(-g)) - s2 / up))
        return gradient, curvature


def fitted_shift(
    pairs: Sequence[tuple[float, bool]],
    groups: Sequence[Sequence[float]] = (),
    prior_sd: float | None = PRIOR_SD,
) -> float:
    """The log-odds shift that best fits the verdicts within the bounds.

    ``pairs`` are (estimate, fitted) for single lessons; each of ``groups`` is a 👍'd comment's
    estimates, at least one of which fitted. The most probable shift under a normal prior of
    spread ``prior_sd`` (None: the maximum likelihood alone, statsmodels' GLM with the logits
    as offset). The log-posterior is concave in the shift, so its maximum on
    [-MAX_SHIFT, MAX_SHIFT] is an end whose slope points out, or the one root of the slope
    inside: found by Newton's method, kept inside a shrinking bracket by bisection.
    Without a prior, all-helpful or all-unhelpful verdicts end at a bound.
    """
    pairs = [(_bounded(p), bool(y)) for p, y in pairs]
    groups = [[_bounded(p) for p in g] for g in groups if len(g)]
    if not pairs and not groups:
        return 0.0
    likelihood = _Likelihood(pairs, groups, prior_sd)
    lo, hi = -MAX_SHIFT, MAX_SHIFT
    if likelihood.slope(lo)[0] <= 0:
        return lo
    if likelihood.slope(hi)[0] >= 0:
        return hi
    shift = 0.0
    for _ in range(100):
        gradient, curvature = likelihood.slope(shift)
        if gradient > 0:
            lo = shift
        else:
            hi = shift
        step = gradient / curvature if curvature > 1e-12 else math.inf
        following = shift + step
        if not lo < following < hi:
            following = (lo + hi) / 2  # Newton would leave the bracket: halve it instead
        if abs(following - shift) < 1e-12 or hi - lo < 1e-12:
            return following
        shift = following
    return shift


def label_rows(session: Session, scope: str) -> list[LabelRow]:
    """The scope's verdicts as the fit reads them."""
    rows = session.execute(
        select(
            FitLabel.ticket_key,
            FitLabel.bullet_id,
            FitLabel.actor,
            FitLabel.source,
            FitLabel.helpful,
            FitLabel.relevance,
        ).where(FitLabel.scope == scope)
    )
    return [
        LabelRow(r.ticket_key, r.bullet_id, r.actor, r.source, bool(r.helpful), r.relevance)
        for r in rows
    ]


def refit(session: Session, scope: str, now: datetime | None = None) -> FitCalibration | None:
    """Fit the scope's shift from its verdicts; None (and no shift) below MIN_LABELS.

    Idempotent: the fit reads every verdict of the scope, so it can run after each one.
    """
    found = evidence(label_rows(session, scope))
    row = session.get(FitCalibration, scope)
    # This process's searches read the new shift at once (others within seconds).
    cached.forget()
    if found.labels < MIN_LABELS:
        if row is not None:
            session.delete(row)
            session.flush()
        return None
    if row is None:
        row = FitCalibration(scope=scope)
        session.add(row)
    row.labels = found.labels
    row.helpful = found.helpful
    row.shift = fitted_shift(found.pairs, found.groups, PRIOR_SD)
    row.fitted_at = now or clock.now()
    session.flush()
    return row


def labelled_scopes(session: Session) -> list[str]:
    """Every scope with at least one verdict, or a calibration left from one, by name."""
    scopes = set(session.scalars(select(FitLabel.scope).distinct()))
    scopes.update(session.scalars(select(FitCalibration.scope)))
    return sorted(scopes)


def refit_all(session: Session, now: datetime | None = None) -> dict[str, FitCalibration | None]:
    """``refit`` every scope with verdicts (an operator's `relevance --refit`)."""
    return {scope: refit(session, scope, now) for scope in labelled_scopes(session)}

"""A scope's recalibration of the relevance estimate from its people's verdicts, within bounds."""

from __future__ import annotations

import math
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.orm import Session

from playbook import clock
from playbook.models import FitCalibration, FitLabel
from playbook.search import calibration as cached

# Below this many labelled pairs with an estimate, a scope keeps the packaged model as is.
MIN_LABELS = 50
# The most a scope's verdicts move the estimate's log-odds either way (x/÷ 4 in odds): a
# team's few dozen labels can correct the model's level for its tickets, not overturn it.
MAX_SHIFT = math.log(4.0)


def fitted_shift(pairs: list[tuple[float, bool]]) -> float:
    """The log-odds shift that best fits the pairs (maximum likelihood), clipped to the bounds.

    One parameter, so Newton's method on the log-likelihood converges in a few steps.
    """
    offsets = [math.log(p / (1 - p)) for p, _ in pairs]
    ys = [1.0 if y else 0.0 for _, y in pairs]
    shift = 0.0
    for _ in range(50):
        probs = [1.0 / (1.0 + math.exp(-(o + shift))) for o in offsets]
        gradient = sum(y - q for y, q in zip(ys, probs, strict=True))
        curvature = sum(q * (1 - q) for q in probs)
        if curvature <= 1e-12:
            break
        step = gradient / curvature
        shift = max(-MAX_SHIFT * 2, min(MAX_SHIFT * 2, shift + step))
        if abs(step) < 1e-9:
            break
    return max(-MAX_SHIFT, min(MAX_SHIFT, shift))


def refit(session: Session, scope: str, now: datetime | None = None) -> FitCalibration | None:
    """Fit the scope's shift from its labelled pairs; None (and no shift) below MIN_LABELS."""
    rows = session.execute(
        select(FitLabel.relevance, FitLabel.helpful).where(
            FitLabel.scope == scope, FitLabel.relevance.is_not(None)
        )
    ).all()
    eps = 1e-6
    pairs = [(min(max(float(r), eps), 1 - eps), bool(h)) for r, h in rows]
    row = session.get(FitCalibration, scope)
    # This process's searches read the new shift at once (others within seconds).
    cached.forget()
    if len(pairs) < MIN_LABELS:
        if row is not None:
            session.delete(row)
        return None
    if row is None:
        row = FitCalibration(scope=scope)
        session.add(row)
    row.labels = len(pairs)
    row.helpful = sum(1 for _, y in pairs if y)
    row.shift = fitted_shift(pairs)
    row.fitted_at = now or clock.now()
    session.flush()
    return row

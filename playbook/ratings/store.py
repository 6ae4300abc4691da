"""Ratings as their own rows: one per lesson and PR, with their count and sum kept on the lesson.

A rating is never a cite: it moves no cite counter and settles nothing. It reaches ranking
through `bullets.ratings` / `bullets.rating_sum` (see `playbook.search.ranking.rating_multiplier`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import func, select, update
from sqlalchemy.orm import Session

from playbook import clock
from playbook.models import Bullet, Rating

# A reason is one line for a person: a model's essay is cut here.
MAX_REASON_CHARS = 300


@dataclass(frozen=True)
class Scored:
    """One lesson's rating as the model gave it, parsed and bounded."""

    bullet_id: str
    score: float  # in [-1, 1]
    reason: str


def bounded_score(value: float) -> float:
    """A score inside [-1, 1]; NaN is no score at all (0)."""
    if math.isnan(value):
        return 0.0
    return max(-1.0, min(1.0, float(value)))


def one_line(text: str) -> str:
    """A reason as one bounded line: whitespace collapsed, cut at `MAX_REASON_CHARS`."""
    return " ".join(text.split())[:MAX_REASON_CHARS]


def record(
    session: Session,
    scored: Iterable[Scored],
    *,
    pr_key: str,
    ticket_key: str | None,
    model: str,
    prompt_version: str,
    at: datetime | None = None,
) -> list[str]:
    """Store each rating not stored yet for (lesson, PR); the ids of the lessons newly rated.

    A job run twice, or a backfill after a job, finds its rows and adds nothing, so the
    lesson's count and sum move once per PR.
    """
    when = at or clock.now()
    rated = set(session.scalars(select(Rating.bullet_id).where(Rating.pr_key == pr_key)))
    added: list[str] = []
    for item in scored:
        if item.bullet_id in rated or session.get(Bullet, item.bullet_id) is None:
            continue
        score = bounded_score(item.score)
        session.add(
            Rating(
                bullet_id=item.bullet_id,
                ticket_key=ticket_key,
                pr_key=pr_key,
                score=score,
                reason=one_line(item.reason),
                model=model[:200],
                prompt_version=prompt_version,
                rated_at=when,
            )
        )
        session.execute(
            update(Bullet)
            .where(Bullet.id == item.bullet_id)
            .values(ratings=Bullet.ratings + 1, rating_sum=Bullet.rating_sum + score)
        )
        rated.add(item.bullet_id)
        added.append(item.bullet_id)
    session.flush()
    return added


@dataclass(frozen=True)
class Summary:
    """A lesson's ratings: how many, their mean, and the latest few for a person to read."""

    count: int
    mean: float | None
    latest: list[Rating]


def summary(session: Session, bullet_id: str, latest: int = 5) -> Summary:
    """The count and mean of a lesson's ratings and its ``latest`` ratings, newest first."""
    count, total = session.execute(
        select(func.count(Rating.id), func.coalesce(func.sum(Rating.score), 0.0)).where(
            Rating.bullet_id == bullet_id
        )
    ).one()
    rows = list(
        session.scalars(
            select(Rating)
            .where(Rating.bullet_id == bullet_id)
            .order_by(Rating.rated_at.desc(), Rating.id.desc())
            .limit(latest)
        )
    )
    return Summary(int(count), (float(total) / count) if count else None, rows)


def rated_pulls(session: Session, pr_keys: Sequence[str]) -> set[str]:
    """Which of these PRs have at least one rating."""
    if not pr_keys:
        return set()
    return set(session.scalars(select(Rating.pr_key).where(Rating.pr_key.in_(list(pr_keys)))))


def totals(session: Session) -> tuple[int, int, float | None]:
    """All ratings: how many, over how many lessons, and their mean score."""
    count, lessons, mean = session.execute(
        select(
            func.count(Rating.id),
            func.count(func.distinct(Rating.bullet_id)),
            func.avg(Rating.score),
        )
    ).one()
    return int(count), int(lessons), (float(mean) if mean is not None else None)

"""The model's daily budgets: calls and tokens spent per UTC day, and whether more may be spent."""

from __future__ import annotations

from datetime import datetime, timedelta

from sqlalchemy import select, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

from playbook import clock
from playbook.models import ModelUsage


def day_of(when: datetime) -> str:
    """The UTC day a call counts for, as ``YYYY-MM-DD``."""
    return clock.to_utc(when).strftime("%Y-%m-%d")


def next_day(when: datetime) -> datetime:
    """The start of the UTC day after ``when``: when a spent budget is whole again."""
    start = clock.to_utc(when).replace(hour=0, minute=0, second=0, microsecond=0)
    return start + timedelta(days=1)


def spent(session: Session, day: str) -> tuple[int, int, int]:
    """Calls, tokens and failed calls counted on ``day``."""
    row = session.get(ModelUsage, day)
    return (row.calls, row.tokens, row.failures) if row else (0, 0, 0)


def add(session: Session, day: str, *, calls: int, tokens: int, failures: int = 0) -> None:
    """Count calls and tokens spent on ``day``; concurrent workers add up, nothing is lost."""
    dialect = {"postgresql": postgresql, "sqlite": sqlite}[session.get_bind().dialect.name]
    session.execute(
        dialect.insert(ModelUsage)
        .values(day=day, calls=0, tokens=0, failures=0)
        .on_conflict_do_nothing(index_elements=["day"])
    )
    session.execute(
        update(ModelUsage)
        .where(ModelUsage.day == day)
        .values(
            calls=ModelUsage.calls + calls,
            tokens=ModelUsage.tokens + tokens,
            failures=ModelUsage.failures + failures,
        )
    )


def over_budget(
    session: Session, now: datetime, *, daily_calls: int, daily_tokens: int
) -> str | None:
    """Why no model call may be made today (which budget is spent), or None when one may.

    A call needs one request left (a retry may take a second: it is counted when made, so a
    day ends at most one request and one answer over). 0 allows none.
    """
    calls, tokens, _ = spent(session, day_of(now))
    if calls >= daily_calls:
        return f"the daily budget of {daily_calls} model calls is spent ({calls} made today)"
    if tokens >= daily_tokens:
        return f"the daily budget of {daily_tokens} model tokens is spent ({tokens} used today)"
    return None


def recent(session: Session, days: int = 7) -> list[ModelUsage]:
    """The last ``days`` days that saw model calls, newest first."""
    return list(session.scalars(select(ModelUsage).order_by(ModelUsage.day.desc()).limit(days)))

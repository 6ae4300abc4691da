"""The report's window: tickets assigned from ``since`` up to (not including) ``until``."""

from __future__ import annotations

from datetime import UTC, date, datetime, time, timedelta


def through(day: date) -> datetime:
    """Where a window that runs through ``day`` ends: when the next day begins (open after
    the last day there is), so ``--until 2026-11-30`` includes the 30th, as people mean it."""
    if day == date.max:
        return datetime.max.replace(tzinfo=UTC)
    return datetime.combine(day + timedelta(days=1), time.min, tzinfo=UTC)

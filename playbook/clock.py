"""The one clock the domain reads, so tests can move time without patching datetime."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime


def _system_time() -> datetime:
    return datetime.now(UTC)


_source: Callable[[], datetime] = _system_time


def now() -> datetime:
    """Return the current time as an aware UTC datetime."""
    return _source()


def set_clock(source: Callable[[], datetime]) -> None:
    """Replace the time source (tests use this to pin or advance time)."""
    global _source
    _source = source


def reset() -> None:
    """Go back to the system clock."""
    set_clock(_system_time)


@contextmanager
def frozen(at: datetime) -> Iterator[None]:
    """Pin the clock to ``at`` for the duration of a ``with`` block."""
    previous = _source
    set_clock(lambda: at)
    try:
        yield
    finally:
        set_clock(previous)


def to_utc(value: datetime) -> datetime:
    """Treat naive datetimes as UTC and convert aware ones to UTC."""
    if value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    return value.astimezone(UTC)


def parse_time(value: str | float | datetime) -> datetime:
    """Parse an ISO 8601 string or a Unix timestamp (seconds or milliseconds) into UTC.

    Agents write timestamps in whatever their runtime prints: JavaScript's epoch
    milliseconds, Python's isoformat, or Jira's ``2008-06-10T21:09:10.000+0000``.
    """
    if isinstance(value, datetime):
        return to_utc(value)
    if isinstance(value, bool):
        raise ValueError(f"not a timestamp: {value!r}")
    if isinstance(value, int | float):
        seconds = value / 1000 if value > 10_000_000_000 else value
        return datetime.fromtimestamp(seconds, UTC)
    text = str(value).strip()
    if text.endswith("Z"):
        text = text[:-1] + "+00:00"
    # Jira writes offsets without a colon (+0000); fromisoformat accepts that since 3.11.
    return to_utc(datetime.fromisoformat(text))

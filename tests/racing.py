"""Run one call from many threads at once, each in its own transaction, and sort the outcomes."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from typing import Any

import pytest
from sqlalchemy import Engine

from playbook.errors import InvalidTransition

# Long enough for twenty PostgreSQL transactions queued on one row lock on a busy machine;
# only a hang guard (a broken barrier lets every thread go on), never a speed claim.
GATE_SECONDS = 60.0


def race(n: int, call: Callable[[int], Any]) -> list[Any]:
    """``call(i)`` from ``n`` threads released together; each result, or the exception raised."""
    start = threading.Barrier(n)
    results: list[Any] = [None] * n

    def run(i: int) -> None:
        start.wait(GATE_SECONDS)
        try:
            results[i] = call(i)
        except Exception as error:  # collected, so the test says what each thread got
            results[i] = error

    threads = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(n)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(GATE_SECONDS * 2)
    assert not any(t.is_alive() for t in threads), "a racing thread never finished"
    return results


def kinds(results: list[Any], changed: Callable[[Any], bool]) -> Counter[str]:
    """How many threads changed the row, found nothing to change, or lost with a conflict;
    anything else (an unexpected exception) is counted by its type name."""
    counts: Counter[str] = Counter()
    for result in results:
        if isinstance(result, InvalidTransition):
            counts["refused"] += 1
        elif isinstance(result, Exception):
            counts[f"{type(result).__name__}: {result}"] += 1
        else:
            counts["changed" if changed(result) else "unchanged"] += 1
    return counts


@contextmanager
def all_read_first(
    monkeypatch: pytest.MonkeyPatch, engine: Engine, module: Any, name: str, n: int
) -> Iterator[None]:
    """On PostgreSQL, hold each of ``n`` threads after its first ``module.name`` call (the read
    of the row it will change) until all have read: the interleaving a busy server produces by
    chance, every time. SQLite opens each write transaction with BEGIN IMMEDIATE, so there the
    threads cannot all read first, and nothing is held."""
    if engine.dialect.name != "postgresql":
        yield
        return
    original = getattr(module, name)
    gate = threading.Barrier(n)
    seen = threading.local()

    def held(*args: Any, **kwargs: Any) -> Any:
        found = original(*args, **kwargs)
        if not getattr(seen, "done", False):
            seen.done = True
            # A thread that failed before reading breaks the gate: the others go on.
            with suppress(threading.BrokenBarrierError):
                gate.wait(GATE_SECONDS)
        return found

    monkeypatch.setattr(module, name, held)
    try:
        yield
    finally:
        monkeypatch.setattr(module, name, original)

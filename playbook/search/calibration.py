"""Each scope's recalibration of the relevance estimate, as searches read it: from a cache."""

from __future__ import annotations

import threading
import time
import weakref

from sqlalchemy import Engine, select
from sqlalchemy.orm import Session

from playbook.models import FitCalibration

# A search reads the shifts from memory: they change only when people's verdicts are refitted,
# which clears this process's copy at once; other processes see a refit within this many seconds.
TTL_SECONDS = 10.0

_CACHE: weakref.WeakKeyDictionary[Engine, tuple[float, dict[str, float]]] = (
    weakref.WeakKeyDictionary()
)
_LOCK = threading.Lock()


def shift(session: Session, scope: str) -> float:
    """The scope's log-odds shift (0 until its people's verdicts taught one)."""
    engine = session.get_bind()
    engine = getattr(engine, "engine", engine)
    now = time.monotonic()
    with _LOCK:
        cached = _CACHE.get(engine)
    if cached is None or now - cached[0] > TTL_SECONDS:
        rows = session.execute(select(FitCalibration.scope, FitCalibration.shift)).all()
        cached = (now, {name: float(value) for name, value in rows})
        with _LOCK:
            _CACHE[engine] = cached
    return cached[1].get(scope, 0.0)


def forget() -> None:
    """Read the shifts again at the next search (after a refit, or a database restored)."""
    with _LOCK:
        _CACHE.clear()

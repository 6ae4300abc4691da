"""Fixed-window rate limits kept in the database, so every process and worker shares them."""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import Engine, delete

from playbook import clock, db
from playbook.models import RateWindow


@dataclass(frozen=True)
class Verdict:
    """Whether a request may go ahead; if not, how many seconds until it may."""

    allowed: bool
    hits: int
    limit: int
    retry_after: int = 0


def hit(
    engine: Engine, key: str, limit: int, *, window_seconds: int = 60, now: datetime | None = None
) -> Verdict:
    """Count one request of ``key`` in the current window; refused once it passes ``limit``.

    One upsert (``INSERT ... ON CONFLICT DO UPDATE SET hits = hits + 1 RETURNING hits``),
    atomic on SQLite and PostgreSQL, in its own transaction: concurrent requests on any
    number of processes each get a distinct count, and a refused request still counts.
    """
    moment = (now or clock.now()).timestamp()
    window = int(moment // window_seconds) * window_seconds
    insert = db.conflict_insert(engine, RateWindow).values(key=key, window_start=window, hits=1)
    statement = insert.on_conflict_do_update(
        index_elements=["key", "window_start"], set_={"hits": RateWindow.hits + 1}
    ).returning(RateWindow.hits)
    with db.transaction(engine) as session:
        hits = int(session.execute(statement).scalar_one())
        if hits == 1:
            # The first request of a window sweeps the caller's older windows away.
            stale = RateWindow.key == key, RateWindow.window_start < window
            session.execute(delete(RateWindow).where(*stale))
    if hits <= limit:
        return Verdict(True, hits, limit)
    return Verdict(False, hits, limit, max(1, math.ceil(window + window_seconds - moment)))

"""Lessons anchored to what a ticket names: found by their anchors, not by shared words."""

from __future__ import annotations

import threading
import weakref
from collections.abc import Collection
from dataclasses import dataclass

from sqlalchemy import Engine, Text, cast, or_, select
from sqlalchemy.orm import Session

from playbook.anchors import matching
from playbook.models import Bullet
from playbook.version import playbook_version

# An anchored lesson the ticket names ranks this many times its text score, and ahead of
# every lesson it names nothing of: a file in a stack trace says more than shared words.
ANCHOR_BOOST = 2.0
# The relevance estimate of a lesson whose anchor the ticket names, on its anchor alone: the
# words' estimate reads shared words, which a lesson found by its path may have none of.
ANCHOR_RELEVANCE = 0.5
# The most anchored lessons one ticket raises: a broad glob (`**`) must not flood a search.
MAX_RAISED = 20


@dataclass(frozen=True)
class _Anchored:
    bullet_id: str
    scope: str
    paths: tuple[str, ...]
    symbols: tuple[str, ...]


# Active anchored lessons per database, read again when the playbook version moves: few
# lessons are anchored, and every search with a named path asks.
_CACHE: weakref.WeakKeyDictionary[Engine, tuple[int, list[_Anchored]]] = weakref.WeakKeyDictionary()
_LOCK = threading.Lock()
# A cleared anchor may be stored as JSON null, not SQL NULL: both are left out.
_ANCHORED = select(Bullet.id, Bullet.scope, Bullet.paths, Bullet.symbols).where(
    Bullet.status == "active",
    or_(cast(Bullet.paths, Text) != "null", cast(Bullet.symbols, Text) != "null"),
)


def estimate(fit: float | None) -> float:
    """The estimate of a lesson the ticket names the anchor of, whose words fit it by ``fit``.

    Either piece of evidence may say the lesson fits (a noisy or): the anchor alone gives
    ANCHOR_RELEVANCE, fitting words raise it, so a floor above the anchor's keeps the lessons
    whose words fit too.
    """
    return 1.0 - (1.0 - ANCHOR_RELEVANCE) * (1.0 - min(max(fit or 0.0, 0.0), 1.0))


def forget() -> None:
    """Drop the cached anchored lessons: for when a database was emptied or restored under it."""
    with _LOCK:
        _CACHE.clear()


def _active_anchored(session: Session) -> list[_Anchored]:
    engine = session.get_bind()
    engine = getattr(engine, "engine", engine)
    version = playbook_version(session)
    with _LOCK:
        cached = _CACHE.get(engine)
    if cached is not None and cached[0] == version:
        return cached[1]
    rows = [
        _Anchored(row.id, row.scope, tuple(row.paths or ()), tuple(row.symbols or ()))
        for row in session.execute(_ANCHORED)
        if row.paths or row.symbols
    ]
    with _LOCK:
        _CACHE[engine] = (version, rows)
    return rows


def lessons_named(
    session: Session, named: matching.Named, scopes: Collection[str]
) -> dict[str, str]:
    """The active lessons of ``scopes`` anchored to what ``named`` names: id -> what matched."""
    if not named:
        return {}
    found: dict[str, str] = {}
    for lesson in _active_anchored(session):
        if lesson.scope not in scopes:
            continue
        why = matching.match(named, lesson.paths, lesson.symbols)
        if why is not None:
            found[lesson.bullet_id] = why
            if len(found) >= MAX_RAISED:
                break
    return found

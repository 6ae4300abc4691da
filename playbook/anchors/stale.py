"""The stale flag: a merged PR changed what a lesson is anchored to; a maintainer looks.

A flag never deprecates: it lists the lesson (``flagged``) until a maintainer clears it
(``clear``) or confirms it by an edit, a supersession or a deprecation (the lifecycle clears
it then). Paths are matched by the one rule (`globs`); a lesson's symbols count as changed
when the PR's patches remove their definition (`symbols`): those of the files its paths
match, or every file's when it has symbols only.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from playbook import clock
from playbook.anchors import globs, symbols
from playbook.anchors.detail import GONE, files_gone
from playbook.errors import BulletNotFound
from playbook.lessons import fields
from playbook.lessons.lifecycle import cleared_note, snapshot, unflag
from playbook.models import Bullet, Revision
from playbook.scopes import EVERYTHING, View
from playbook.version import bump_version

FLAG = "flag_stale"
CLEAR = "clear_stale"
# Only these change what a lesson is about; "added", "copied", "changed" (the mode) and
# "unchanged" leave the anchored file as it was.
MODIFIED, REMOVED, RENAMED = "modified", "removed", "renamed"
# A detail names at most this many files of each kind, and is cut at DETAIL_CHARS.
DETAIL_FILES = 5
DETAIL_CHARS = 1000
_VERBS = {REMOVED: "deleted", RENAMED: "renamed", MODIFIED: "modified"}


@dataclass(frozen=True)
class FileChange:
    """One file of a PR's "List pull requests files" answer: its status and path(s)."""

    status: str
    path: str
    previous: str | None = None  # the old path of a renamed file
    patch: str | None = None  # the start of its unified diff; None when GitHub gives none


@dataclass(frozen=True)
class Flagged:
    """A lesson a PR flagged: what changed, and its anchors after renames were followed."""

    bullet_id: str
    detail: str
    paths: list[str]


def flag(
    session: Session, scope: str, pr: str, changes: Sequence[FileChange], *, actor: str
) -> list[Flagged]:
    """Flag the active lessons of ``scope`` anchored to files the merged PR ``pr`` changed,
    or naming a symbol whose definition its patches removed.

    An anchor naming a renamed file exactly follows it to its new path. Idempotent: a
    lesson this PR flagged once (cleared since or not) is left alone.
    """
    relevant = [c for c in changes if c.status in _VERBS and c.path]
    if not relevant:
        return []
    candidates = session.execute(
        select(Bullet.id, Bullet.paths, Bullet.symbols).where(
            Bullet.scope == scope, Bullet.status == "active"
        )
    ).all()
    # Each changed path split once, each lesson's globs read once (3,000 files at most).
    index = globs.Index(_old(c) for c in relevant)
    # The patches are read only when a lesson names a symbol (most name none).
    named_any = any(_anchors(names) for _, _, names in candidates)
    removed = symbols.removed((c.path, c.patch) for c in changes) if named_any else {}
    hits: list[_Hit] = []
    for bullet_id, paths, names in candidates:
        anchors, named = _anchors(paths), _anchors(names)
        if not anchors and not named:
            continue  # most lessons: anchored only to their ticket
        touched = [relevant[i] for i in sorted(index.matching(anchors))] if anchors else []
        # A lesson with paths counts the files they match; one with symbols only, every file.
        within = {c.path for c in touched} if anchors else None
        gone = _removed_symbols(named, removed, within)
        if touched or gone:
            hits.append(_Hit(bullet_id, touched, gone))
    if not hits:
        return []
    already = _flagged_by(session, pr, [hit.bullet_id for hit in hits])
    todo = [hit for hit in hits if hit.bullet_id not in already]
    if not todo:
        return []
    # The playbook's version row first, then the lessons': the lifecycle's lock order.
    version = bump_version(session)
    done: list[Flagged] = []
    for hit in todo:
        bullet = _locked(session, hit.bullet_id)
        if bullet is None or bullet.status != "active":
            continue
        done.append(_flag_one(session, bullet, pr, hit, actor, version))
    return done


@dataclass(frozen=True)
class _Hit:
    """A lesson the PR is about: the anchored files it changed, the symbols it removed."""

    bullet_id: str
    touched: list[FileChange]
    symbols: list[tuple[str, str]]  # (the name removed, the file it was removed from)


def _removed_symbols(
    named: list[str], removed: dict[str, list[str]], within: set[str] | None
) -> list[tuple[str, str]]:
    """(name, file) for each of a lesson's symbols the PR removed, in files of ``within``."""
    found: dict[tuple[str, str], None] = {}
    for symbol in named:
        for key in symbols.keys(symbol):
            files = [f for f in removed.get(key, ()) if within is None or f in within]
            if files:
                found.setdefault((key, files[0]), None)
                break
    return list(found)


def anchored_in(session: Session, scope: str) -> bool:
    """Whether an active lesson of ``scope`` has anchors (a PR's files are worth reading)."""
    rows = session.execute(
        select(Bullet.paths, Bullet.symbols).where(Bullet.scope == scope, Bullet.status == "active")
    ).all()
    return any(_anchors(paths) or _anchors(names) for paths, names in rows)


def _flag_one(
    session: Session, bullet: Bullet, pr: str, hit: _Hit, actor: str, version: int
) -> Flagged:
    touched = hit.touched
    before = _state(bullet)
    anchors = _anchors(bullet.paths)
    renamed = {c.previous: c.path for c in touched if c.status == RENAMED and c.previous}
    followed = [renamed.get(a, a) if globs.is_plain(a) else a for a in anchors]
    removed = {c.path for c in touched if c.status == REMOVED}
    gone = bool(anchors) and all(globs.is_plain(a) and a in removed for a in anchors)
    detail = describe(pr, touched, gone=gone, symbols_removed=hit.symbols)
    now = clock.now()
    if bullet.stale_since is not None and bullet.stale_detail:
        # Flagged before and not looked at yet: keep when, and what the earlier PR did.
        detail = _cut(f"{detail}; earlier: {bullet.stale_detail}")
    else:
        bullet.stale_since = now
    bullet.stale_detail = detail
    bullet.stale_pr = pr[:200]
    if followed != anchors:
        bullet.paths = followed
    bullet.version = version
    session.add(
        Revision(
            bullet_id=bullet.id,
            action=FLAG,
            actor=actor,
            at=now,
            reason=detail,
            before=before,
            after=_state(bullet),
        )
    )
    session.flush()
    return Flagged(bullet.id, detail, followed)


def describe(
    pr: str,
    touched: Iterable[FileChange],
    *,
    gone: bool = False,
    symbols_removed: Sequence[tuple[str, str]] = (),
) -> str:
    """One line of what ``pr`` did to the anchored files and symbols: "acme/api#12 deleted
    a.py; removed symbol acquire in b.py"."""
    kinds: dict[str, list[str]] = {REMOVED: [], RENAMED: [], MODIFIED: []}
    for change in touched:
        name = f"{change.previous} -> {change.path}" if change.status == RENAMED else change.path
        kinds[change.status].append(name)
    parts = []
    for status, names in kinds.items():
        if names:
            more = len(names) - DETAIL_FILES
            listed = ", ".join(names[:DETAIL_FILES]) + (f" and {more} more" if more > 0 else "")
            parts.append(f"{_VERBS[status]} {listed}")
    parts.extend(
        f"removed symbol {name} in {path}" for name, path in symbols_removed[:DETAIL_FILES]
    )
    text = f"{pr} " + "; ".join(parts)
    if gone:
        text = f"{pr} {GONE} ({'; '.join(parts)})"
    return _cut(text)


def clear(session: Session, bullet_id: str, *, actor: str, reason: str | None = None) -> bool:
    """Clear ``bullet_id``'s flag (revision ``clear_stale``); False when it was not flagged."""
    why = fields.text(reason or "", "reason", fields.REASON_CHARS)
    if session.get(Bullet, bullet_id) is None:
        raise BulletNotFound(bullet_id)
    # The playbook's version row first, then the lesson's: the lifecycle's lock order.
    version = bump_version(session)
    bullet = _locked(session, bullet_id)
    if bullet is None or bullet.stale_since is None:
        return False
    before = _state(bullet)
    note = cleared_note(bullet, why or None)
    unflag(bullet)
    bullet.version = version
    session.add(
        Revision(
            bullet_id=bullet.id,
            action=CLEAR,
            actor=actor,
            at=clock.now(),
            reason=note,
            before=before,
            after=_state(bullet),
        )
    )
    session.flush()
    return True


def flagged(
    session: Session, view: View = EVERYTHING, scope: str | None = None, limit: int = 500
) -> list[dict[str, Any]]:
    """The flagged lessons ``view`` sees (of ``scope`` if given), oldest flag first.

    Active ones only: an archived lesson is served to nobody, so nobody needs to look at it;
    it keeps its flag, and a restore lists it again."""
    query = select(Bullet).where(
        Bullet.stale_since.is_not(None), Bullet.status == "active", view.lessons()
    )
    if scope is not None:
        query = query.where(Bullet.scope == scope)
    rows = session.scalars(query.order_by(Bullet.stale_since, Bullet.id).limit(limit)).all()
    return [as_dict(bullet) for bullet in rows]


def as_dict(bullet: Bullet) -> dict[str, Any]:
    """A flagged lesson for the CLI, the API and the page."""
    return {
        "id": bullet.id,
        "text": bullet.text,
        "scope": bullet.scope,
        "status": bullet.status,
        "paths": list(bullet.paths or []),
        "stale_since": bullet.stale_since,
        "stale_detail": bullet.stale_detail,
        "stale_pr": bullet.stale_pr,
        "files_gone": files_gone(bullet.stale_detail) is not None,
    }


def _state(bullet: Bullet) -> dict[str, Any]:
    """The lesson's revisable values, and its anchors (a rename rewrites them).

    A whole snapshot, as every revision keeps: `as_of` and `revert` read it. The flag itself
    is in the revision's reason, not in its values.
    """
    return {**snapshot(bullet), "paths": list(bullet.paths or [])}


def _flagged_by(session: Session, pr: str, bullet_ids: list[str]) -> set[str]:
    """Which of ``bullet_ids`` the PR ``pr`` flagged before (its detail starts with the PR)."""
    rows = session.execute(
        select(Revision.bullet_id, Revision.reason).where(
            Revision.action == FLAG, Revision.bullet_id.in_(bullet_ids)
        )
    ).all()
    return {bullet_id for bullet_id, reason in rows if (reason or "").startswith(f"{pr} ")}


def _locked(session: Session, bullet_id: str) -> Bullet | None:
    return session.get(Bullet, bullet_id, with_for_update=True, populate_existing=True)


def _anchors(paths: Any) -> list[str]:
    if not isinstance(paths, list):
        return []
    return [p for p in paths if isinstance(p, str) and p]


def _old(change: FileChange) -> str:
    return change.previous if change.status == RENAMED and change.previous else change.path


def _cut(text: str) -> str:
    return text if len(text) <= DETAIL_CHARS else text[: DETAIL_CHARS - 1] + "…"

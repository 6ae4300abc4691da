"""Bulk writes from imported values: `put_many` checks a whole batch, then writes it at once."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import func, insert, select, update
from sqlalchemy.orm import Session

from playbook import clock
from playbook.lessons import fields
from playbook.lessons.checks import check_fields
from playbook.lessons.fields import FieldProblem
from playbook.lessons.ids import canonical_number
from playbook.lessons.lifecycle import SNAPSHOT_FIELDS, Change, get
from playbook.models import Bullet, Revision
from playbook.version import bump_version


def put(
    session: Session,
    values: Mapping[str, Any],
    *,
    actor: str,
    reason: str | None = None,
    max_chars: int = fields.MAX_LESSON_CHARS,
) -> Change:
    """Create or update a bullet with a given id from imported values (idempotent).

    Importing the same values again records nothing, so importing a file twice
    leaves the playbook and its history as they were.
    """
    if not values.get("id"):
        raise FieldProblem("id", "is missing; an imported bullet needs an id")
    done = put_many(session, [values], actor=actor, reason=reason, max_chars=max_chars)[0]
    bullet = get(session, done.id)
    if done.outcome == "unchanged":
        return Change(bullet, None)
    revision = session.scalars(
        select(Revision).where(Revision.bullet_id == done.id).order_by(Revision.id.desc())
    ).first()
    return Change(bullet, revision)


@dataclass(frozen=True)
class Put:
    """What `put_many` did with one entry: its id, the outcome, and the values as checked."""

    id: str
    outcome: str  # created | updated | unchanged
    values: dict[str, Any]


def put_many(
    session: Session,
    entries: Sequence[Mapping[str, Any]],
    *,
    actor: str,
    reason: str | None = None,
    max_chars: int = fields.MAX_LESSON_CHARS,
    numbers_above: int = 0,
    checked: bool = False,
) -> list[Put]:
    """Create or update a batch of bullets from imported values, with one revision per change.

    An entry with an ``id`` creates or updates that bullet (the same values again record
    nothing); one without gets the next free `pb-<n>` (above ``numbers_above`` too, the
    highest `pb-<n>` the rest of an import names, so a later entry never lands on it).
    Every entry is checked before anything is written. The playbook version is bumped once,
    first: on PostgreSQL its row lock queues other writers of bullets, so the existence checks
    below cannot race another import of the same ids. Rows are written with one multi-row
    statement per kind (bullets created, bullets changed, revisions): an import of 100k
    lessons spends its time in the database, not in building ORM objects.
    With ``checked``, the entries are `check_fields`' own output (an import checks its whole
    file before writing any of it) and are not checked a second time.
    """
    batch = (
        [dict(values) for values in entries]
        if checked
        else [check_fields(values, max_chars=max_chars) for values in entries]
    )
    ids: list[str] = []
    for values in batch:
        if "text" not in values:
            raise FieldProblem("text", "is missing; a bullet needs some text")
        if "id" in values:
            ids.append(values["id"])
    if len(set(ids)) != len(ids):
        twice = next(bullet_id for bullet_id in ids if ids.count(bullet_id) > 1)
        raise FieldProblem("id", f"{twice} is given twice")
    version = bump_version(session)
    existing = _stored(session, ids)
    taken = _numbers_taken(
        session, [n for i in ids if i not in existing and (n := canonical_number(i)) is not None]
    )
    now = clock.now()
    created: list[dict[str, Any]] = []
    changed: list[dict[str, Any]] = []
    revisions: list[dict[str, Any]] = []
    done: list[Put] = []
    next_number: int | None = None
    for values in batch:
        if "id" not in values:
            if next_number is None:
                named = [n for n in map(canonical_number, ids) if n is not None]
                highest = session.scalar(select(func.max(Bullet.number))) or 0
                next_number = max(highest, numbers_above, *named) + 1
            values["id"] = f"pb-{next_number}"
            next_number += 1
        bullet_id = values["id"]
        old = existing.get(bullet_id)
        if old is None:
            row = _new_row(values, version, now)
            if row["number"] in taken:
                row["number"] = None  # an older import gave it to another id, `pb-007`
            created.append(row)
            revisions.append(_revision_row(bullet_id, actor, reason, now, None, _snapshot(row)))
            done.append(Put(bullet_id, "created", values))
            continue
        before = _snapshot(old)
        given = {key: values[key] for key in SNAPSHOT_FIELDS if key in values}
        after = before | _snapshot(given)
        created_at = values.get("created_at")
        moved = created_at is not None and created_at != clock.to_utc(old["created_at"])
        if after == before and not moved:
            done.append(Put(bullet_id, "unchanged", values))
            continue
        update_row = {"id": bullet_id, **given, "updated_at": now, "version": version}
        if moved:
            update_row["created_at"] = created_at
        changed.append(update_row)
        revisions.append(_revision_row(bullet_id, actor, reason, now, before, after))
        done.append(Put(bullet_id, "updated", values))
    # Table inserts, not ORM ones: one executemany each, without building mapped objects.
    if created:
        session.execute(insert(Bullet.__table__), created)
    if changed:
        session.execute(update(Bullet), changed)
    if revisions:
        session.execute(insert(Revision.__table__), revisions)
    if created or changed:
        # Past the batch's version: the near-duplicate shortlist re-reads the lessons of the
        # current version on every call (an `add` in flight stamps its lesson with it), which
        # would be this whole batch, again and again, for the rest of an import.
        bump_version(session)
    _expire(session, {put.id for put in done if put.outcome != "unchanged"})
    return done


# Ids per IN (...) list: well under SQLite's and PostgreSQL's limits on bound parameters.
_IN_CHUNK = 500
_STORED_COLUMNS = (Bullet.id, *(getattr(Bullet, key) for key in SNAPSHOT_FIELDS), Bullet.created_at)


def _stored(session: Session, ids: Sequence[str]) -> dict[str, dict[str, Any]]:
    """The revisable fields and creation time of the bullets with these ids that exist."""
    found: dict[str, dict[str, Any]] = {}
    for start in range(0, len(ids), _IN_CHUNK):
        chunk = ids[start : start + _IN_CHUNK]
        query = select(*_STORED_COLUMNS).where(Bullet.id.in_(chunk))
        found.update((row.id, row._asdict()) for row in session.execute(query))
    return found


def _numbers_taken(session: Session, numbers: Sequence[int]) -> set[int]:
    taken: set[int] = set()
    for start in range(0, len(numbers), _IN_CHUNK):
        chunk = numbers[start : start + _IN_CHUNK]
        taken.update(session.scalars(select(Bullet.number).where(Bullet.number.in_(chunk))))
    return taken


def _snapshot(values: Mapping[str, Any]) -> dict[str, Any]:
    """The revisable fields among ``values`` as a revision stores them (JSON-ready)."""
    out: dict[str, Any] = {}
    for key in SNAPSHOT_FIELDS:
        if key in values:
            value = values[key]
            if isinstance(value, datetime):
                value = clock.to_utc(value).isoformat()
            elif key == "tags":
                value = list(value or [])
            elif value is not None and key in ("paths", "symbols"):
                value = list(value)
            out[key] = value
    return out


def _new_row(values: dict[str, Any], version: int, now: datetime) -> dict[str, Any]:
    created_at = values.get("created_at") or now
    return {
        "id": values["id"],
        "number": canonical_number(values["id"]),
        "text": values["text"],
        "section": values.get("section") or "best_practice",
        "tags": values.get("tags") or [],
        "scope": values.get("scope") or "global",
        "learned_from": values.get("learned_from"),
        "source": values.get("source"),
        "source_url": values.get("source_url"),
        "status": values.get("status") or "active",
        "demoted_on": values.get("demoted_on"),
        "demoted_reason": values.get("demoted_reason"),
        "superseded_by": values.get("superseded_by"),
        "paths": values.get("paths"),
        "symbols": values.get("symbols"),
        "created_at": created_at,
        # A new bullet from an export keeps its own times, so export -> import round-trips.
        "updated_at": values.get("updated_at") or created_at,
        "loads": 0,
        "cites": 0,
        "cites_success": 0,
        "cites_failure": 0,
        "version": version,
    }


def _revision_row(
    bullet_id: str,
    actor: str,
    reason: str | None,
    at: datetime,
    before: dict[str, Any] | None,
    after: dict[str, Any],
) -> dict[str, Any]:
    return {
        "bullet_id": bullet_id,
        "action": "import",
        "actor": actor,
        "at": at,
        "reason": reason,
        "before": before,
        "after": after,
    }


def _expire(session: Session, ids: set[str]) -> None:
    # The rows were written around the ORM: a Bullet this session already holds would
    # otherwise keep its old values.
    if ids:
        for obj in list(session.identity_map.values()):
            if isinstance(obj, Bullet) and obj.id in ids:
                session.expire(obj)

"""Bullet lifecycle: add, edit, approve, deprecate, archive, restore, revert, with revisions."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import func, select, update
from sqlalchemy.orm import Session

from playbook import clock
from playbook.errors import BulletNotFound, InvalidInput, InvalidTransition
from playbook.models import STATUSES, Bullet, PlaybookMeta, Revision
from playbook.usage import COUNTER_FIELDS

# The fields a revision records; counters are derived from usage events, not revised.
SNAPSHOT_FIELDS = (
    "text",
    "section",
    "tags",
    "scope",
    "learned_from",
    "source",
    "source_url",
    "status",
    "demoted_on",
    "demoted_reason",
)
# What a reader of a bullet sees (CLI --json, the agent API): its fields and its counters.
PUBLIC_FIELDS = ("id", *SNAPSHOT_FIELDS, "created_at", "updated_at", *COUNTER_FIELDS)
EDITABLE_FIELDS = ("text", "section", "tags", "scope", "learned_from", "source", "source_url")
DUPLICATE_OVERLAP = 0.8
_ID_NUMBER = re.compile(r"pb-(\d+)")
_WORD = re.compile(r"\w+")


@dataclass(frozen=True)
class AddResult:
    """What `add` did: created a bullet, or found a near-duplicate and created nothing."""

    bullet: Bullet
    created: bool
    overlap: float = 1.0


@dataclass(frozen=True)
class Change:
    """What a lifecycle operation did; `revision` is None when nothing changed."""

    bullet: Bullet
    revision: Revision | None

    @property
    def changed(self) -> bool:
        """True when the operation changed the bullet."""
        return self.revision is not None


def snapshot(bullet: Bullet) -> dict[str, Any]:
    """The revisable fields of a bullet as JSON-ready values."""
    values: dict[str, Any] = {}
    for field in SNAPSHOT_FIELDS:
        value = getattr(bullet, field)
        if isinstance(value, datetime):
            value = clock.to_utc(value).isoformat()
        elif field == "tags":
            value = list(value or [])
        values[field] = value
    return values


def as_dict(bullet: Bullet) -> dict[str, Any]:
    """A bullet with its counters (datetimes stay datetimes for the caller to render)."""
    return {field: getattr(bullet, field) for field in PUBLIC_FIELDS}


def get(session: Session, bullet_id: str) -> Bullet:
    """Load a bullet by id or raise BulletNotFound."""
    bullet = session.get(Bullet, bullet_id)
    if bullet is None:
        raise BulletNotFound(bullet_id)
    return bullet


def normalize_tags(tags: Iterable[str] | str | None) -> list[str]:
    """Split comma-separated tags, strip them and drop empties and repeats, keeping order."""
    if tags is None:
        return []
    items = tags.split(",") if isinstance(tags, str) else list(tags)
    seen: dict[str, None] = {}
    for tag in items:
        cleaned = str(tag).strip()
        if cleaned:
            seen.setdefault(cleaned, None)
    return list(seen)


def word_overlap(a: str, b: str) -> float:
    """Share of words two texts have in common, relative to the larger word set."""
    words_a, words_b = set(_WORD.findall(a.lower())), set(_WORD.findall(b.lower()))
    if not words_a or not words_b:
        return 0.0
    return len(words_a & words_b) / max(len(words_a), len(words_b))


def find_near_duplicate(session: Session, text: str, scope: str) -> tuple[Bullet, float] | None:
    """The live (active or proposed) bullet in ``scope`` whose text overlaps ``text`` most."""
    rows = session.execute(
        select(Bullet.id, Bullet.text).where(
            Bullet.scope == scope, Bullet.status.in_(("active", "proposed"))
        )
    )
    best: tuple[str, float] | None = None
    for bullet_id, other in rows:
        overlap = word_overlap(text, other)
        if overlap >= DUPLICATE_OVERLAP and (best is None or overlap > best[1]):
            best = (bullet_id, overlap)
    if best is None:
        return None
    return get(session, best[0]), best[1]


def bump_version(session: Session) -> int:
    """Increase the playbook version that other processes compare to refresh their caches.

    The UPDATE also takes a row lock on PostgreSQL, which queues concurrent bullet
    writers; that is what makes `pb-<n>` allocation in `add` race-free.
    """
    session.execute(
        update(PlaybookMeta)
        .where(PlaybookMeta.key == "version")
        .values(value=PlaybookMeta.value + 1)
    )
    return playbook_version(session)


def playbook_version(session: Session) -> int:
    """The current playbook version (0 for a new playbook)."""
    return session.scalar(select(PlaybookMeta.value).where(PlaybookMeta.key == "version")) or 0


def _require_text(text: str) -> str:
    cleaned = (text or "").strip()
    if not cleaned:
        raise InvalidInput("a bullet needs some text")
    return cleaned


def _require_status(status: str, allowed: Sequence[str] = STATUSES) -> str:
    if status not in allowed:
        raise InvalidInput(f"status {status!r} is not one of {', '.join(allowed)}")
    return status


def _record(
    session: Session,
    bullet: Bullet,
    action: str,
    actor: str,
    reason: str | None,
    before: dict[str, Any] | None,
) -> Revision:
    revision = Revision(
        bullet_id=bullet.id,
        action=action,
        actor=actor,
        at=clock.now(),
        reason=reason,
        before=before,
        after=snapshot(bullet),
    )
    session.add(revision)
    session.flush()
    return revision


def add(
    session: Session,
    text: str,
    *,
    learned_from: str | None,
    actor: str,
    tags: Iterable[str] | str | None = None,
    scope: str = "global",
    section: str = "best_practice",
    status: str = "active",
    source: str | None = "cli",
    source_url: str | None = None,
    reason: str | None = None,
) -> AddResult:
    """Add a bullet with a new `pb-<n>` id, unless a near-duplicate already exists in its scope."""
    text = _require_text(text)
    _require_status(status, ("proposed", "active"))
    scope = (scope or "global").strip()
    version = bump_version(session)
    duplicate = find_near_duplicate(session, text, scope)
    if duplicate is not None:
        # The version bump above stays: a spurious cache refresh is cheaper than a race.
        return AddResult(bullet=duplicate[0], created=False, overlap=duplicate[1])
    number = (session.scalar(select(func.max(Bullet.number))) or 0) + 1
    now = clock.now()
    bullet = Bullet(
        id=f"pb-{number}",
        number=number,
        text=text,
        section=(section or "best_practice").strip(),
        tags=normalize_tags(tags),
        scope=scope,
        learned_from=learned_from,
        source=source,
        source_url=source_url,
        status=status,
        created_at=now,
        updated_at=now,
        loads=0,
        cites=0,
        cites_success=0,
        cites_failure=0,
        version=version,
    )
    session.add(bullet)
    session.flush()
    _record(session, bullet, "create", actor, reason, None)
    return AddResult(bullet=bullet, created=True)


def put(
    session: Session, values: dict[str, Any], *, actor: str, reason: str | None = None
) -> Change:
    """Create or update a bullet with a given id from imported values (idempotent).

    Importing the same values again records nothing, so importing a file twice
    leaves the playbook and its history as they were.
    """
    bullet_id = str(values.get("id") or "").strip()
    if not bullet_id:
        raise InvalidInput("an imported bullet needs an id")
    fields = {
        key: values[key] for key in (*SNAPSHOT_FIELDS, "created_at", "updated_at") if key in values
    }
    updated_at = fields.pop("updated_at", None)
    if "text" in fields:
        fields["text"] = _require_text(fields["text"])
    if "status" in fields:
        _require_status(fields["status"])
    if "tags" in fields:
        fields["tags"] = normalize_tags(fields["tags"])
    for key in ("demoted_on", "created_at"):
        if isinstance(fields.get(key), str):
            fields[key] = clock.parse_time(fields[key])
    if isinstance(updated_at, str):
        updated_at = clock.parse_time(updated_at)
    bullet = session.get(Bullet, bullet_id)
    if bullet is None:
        if "text" not in fields:
            raise InvalidInput(f"bullet {bullet_id} has no text")
        match = _ID_NUMBER.fullmatch(bullet_id)
        now = clock.now()
        bullet = Bullet(
            id=bullet_id,
            number=int(match.group(1)) if match else None,
            section="best_practice",
            tags=[],
            scope="global",
            status="active",
            loads=0,
            cites=0,
            cites_success=0,
            cites_failure=0,
            updated_at=now,
            version=bump_version(session),
        )
        for key, value in fields.items():
            setattr(bullet, key, value)
        bullet.created_at = fields.get("created_at") or now
        # A new bullet from an export keeps its own times, so export -> import round-trips.
        bullet.updated_at = updated_at or fields.get("created_at") or now
        session.add(bullet)
        session.flush()
        return Change(bullet, _record(session, bullet, "import", actor, reason, None))
    before = snapshot(bullet)
    created_at = fields.pop("created_at", None)
    for key, value in fields.items():
        setattr(bullet, key, value)
    created_changed = created_at is not None and clock.to_utc(created_at) != bullet.created_at
    if snapshot(bullet) == before and not created_changed:
        return Change(bullet, None)
    if created_changed:
        bullet.created_at = created_at
    return _finish(session, bullet, "import", actor, reason, before)


def _finish(
    session: Session,
    bullet: Bullet,
    action: str,
    actor: str,
    reason: str | None,
    before: dict[str, Any],
) -> Change:
    bullet.updated_at = clock.now()
    bullet.version = bump_version(session)
    return Change(bullet, _record(session, bullet, action, actor, reason, before))


def _apply(
    session: Session,
    bullet: Bullet,
    action: str,
    actor: str,
    reason: str | None,
    **values: Any,
) -> Change:
    before = snapshot(bullet)
    for key, value in values.items():
        setattr(bullet, key, value)
    if snapshot(bullet) == before:
        return Change(bullet, None)
    return _finish(session, bullet, action, actor, reason, before)


def edit(
    session: Session, bullet_id: str, *, actor: str, reason: str | None = None, **changes: Any
) -> Change:
    """Change a bullet's text, tags, section, scope or provenance."""
    bullet = get(session, bullet_id)
    unknown = set(changes) - set(EDITABLE_FIELDS)
    if unknown:
        raise InvalidInput(f"cannot edit {', '.join(sorted(unknown))}")
    values = {key: value for key, value in changes.items() if value is not None}
    if "text" in values:
        values["text"] = _require_text(values["text"])
    if "tags" in values:
        values["tags"] = normalize_tags(values["tags"])
    return _apply(session, bullet, "edit", actor, reason, **values)


def approve(session: Session, bullet_id: str, *, actor: str, reason: str | None = None) -> Change:
    """Make a proposed bullet active."""
    bullet = get(session, bullet_id)
    if bullet.status == "active":
        return Change(bullet, None)
    if bullet.status != "proposed":
        raise InvalidTransition(
            f"{bullet_id} is {bullet.status}, not proposed; use `restore` to bring it back"
        )
    return _apply(session, bullet, "approve", actor, reason, status="active")


def deprecate(
    session: Session, bullet_id: str, *, reason: str, actor: str, note: str | None = None
) -> Change:
    """Soft-deprecate a bullet: it stays, with when and why, and stops being retrieved.

    ``reason`` becomes the bullet's ``demoted_reason``; ``note`` (default: the reason)
    is what the revision says, e.g. which PR caused the demotion.
    """
    bullet = get(session, bullet_id)
    if not (reason or "").strip():
        raise InvalidInput("deprecating a bullet needs a reason")
    if bullet.status == "deprecated":
        return Change(bullet, None)
    if bullet.status == "archived":
        raise InvalidTransition(f"{bullet_id} is archived; restore it before deprecating it")
    return _apply(
        session,
        bullet,
        "deprecate",
        actor,
        note or reason,
        status="deprecated",
        demoted_on=clock.now(),
        demoted_reason=reason.strip(),
    )


def archive(session: Session, bullet_id: str, *, reason: str, actor: str) -> Change:
    """Archive a bullet (e.g. pruned as unused); it is kept and can be restored."""
    bullet = get(session, bullet_id)
    if not (reason or "").strip():
        raise InvalidInput("archiving a bullet needs a reason")
    if bullet.status == "archived":
        return Change(bullet, None)
    return _apply(
        session,
        bullet,
        "archive",
        actor,
        reason,
        status="archived",
        demoted_on=clock.now(),
        demoted_reason=reason.strip(),
    )


def restore(session: Session, bullet_id: str, *, actor: str, reason: str | None = None) -> Change:
    """Bring a deprecated or archived bullet back to active and clear its demotion."""
    bullet = get(session, bullet_id)
    if bullet.status == "active":
        return Change(bullet, None)
    if bullet.status == "proposed":
        raise InvalidTransition(
            f"{bullet_id} is proposed, not demoted; use `approve` to activate it"
        )
    return _apply(
        session,
        bullet,
        "restore",
        actor,
        reason,
        status="active",
        demoted_on=None,
        demoted_reason=None,
    )


def history(session: Session, bullet_id: str) -> list[Revision]:
    """Every revision of a bullet, oldest first."""
    get(session, bullet_id)
    return list(
        session.scalars(
            select(Revision).where(Revision.bullet_id == bullet_id).order_by(Revision.id)
        )
    )


def revert(
    session: Session, bullet_id: str, revision_id: int, *, actor: str, reason: str | None = None
) -> Change:
    """Undo one revision: put back the values the bullet had before it.

    Undoing a creation archives the bullet, because nothing is ever deleted.
    """
    bullet = get(session, bullet_id)
    revision = session.get(Revision, revision_id)
    if revision is None or revision.bullet_id != bullet_id:
        raise InvalidInput(f"{bullet_id} has no revision {revision_id}; see `history {bullet_id}`")
    why = reason or f"undo revision {revision_id} ({revision.action})"
    if revision.before is None:
        return archive(session, bullet_id, reason=why, actor=actor)
    values = dict(revision.before)
    if values.get("demoted_on"):
        values["demoted_on"] = clock.parse_time(values["demoted_on"])
    return _apply(session, bullet, "revert", actor, why, **values)


def as_of(session: Session, when: datetime) -> list[dict[str, Any]]:
    """What the playbook said at ``when``: each bullet's values after its last revision by then."""
    rows = session.scalars(
        select(Revision).where(Revision.at <= clock.to_utc(when)).order_by(Revision.id)
    )
    state: dict[str, dict[str, Any]] = {}
    for revision in rows:
        if revision.after is not None:
            state[revision.bullet_id] = {"id": revision.bullet_id, **revision.after}
    return [state[key] for key in sorted(state, key=sort_key)]


def sort_key(bullet_id: str) -> tuple[int, int, str]:
    """Order `pb-2` before `pb-10`, and imported ids after numbered ones."""
    match = _ID_NUMBER.fullmatch(bullet_id)
    return (0, int(match.group(1)), "") if match else (1, 0, bullet_id)

"""Bullet lifecycle: add, edit, approve, deprecate, archive, restore, revert, with revisions."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any

from sqlalchemy import func, insert, select, update
from sqlalchemy.orm import Session

from playbook import clock
from playbook.errors import BulletNotFound, InvalidInput, InvalidTransition
from playbook.lessons import characters, fields
from playbook.lessons.fields import FieldProblem
from playbook.lessons.ids import canonical_number, sort_key
from playbook.models import STATUSES, Bullet, PlaybookMeta, Revision
from playbook.outcomes.usage import COUNTER_FIELDS
from playbook.search.text import bullet_tokens, plain_words

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
TIME_FIELDS = ("demoted_on", "created_at", "updated_at")
# Free-text fields besides the lesson and its provenance, with their column sizes; None or ""
# clears the optional ones.
_OPTIONAL_TEXT = {
    "source": fields.SOURCE_CHARS,
    "source_url": fields.SOURCE_URL_CHARS,
    "demoted_reason": fields.REASON_CHARS,
}
_REQUIRED_TEXT = {"section": fields.SECTION_CHARS, "scope": fields.SCOPE_CHARS}
LEARNED_FROM_MISSING = "is missing; name the ticket the lesson was learned from, e.g. CTMS-4337"
_LEARNED_FROM_EMPTY = "is empty; name the ticket the lesson was learned from, e.g. CTMS-4337"
DUPLICATE_OVERLAP = 0.8


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
    """Load a bullet by id or raise BulletNotFound; an id that is not ASCII is a FieldProblem."""
    if not bullet_id.isascii():  # `pb-` and a full-width 1 is not pb-1, nor any other id
        fields.bullet_id(bullet_id)
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
    words_a, words_b = overlap_words(a), overlap_words(b)
    if not words_a or not words_b:
        return 0.0
    return len(words_a & words_b) / max(len(words_a), len(words_b))


def overlap_words(text: str) -> set[str]:
    """The words `word_overlap` compares: `text.plain_words`, in any language."""
    return set(plain_words(text))


def find_near_duplicate(session: Session, text: str, scope: str) -> tuple[Bullet, float] | None:
    """The live (active or proposed) bullet in ``scope`` whose text overlaps ``text`` most.

    The search index shortlists the few live lessons most like ``text`` and the overlap rule
    is applied to those: a near-duplicate shares most of its words with ``text``, so it
    ranks near the top, and an add costs the same at 100 lessons as at 100,000.
    """
    from playbook.search.retrieval import Retriever  # retrieval builds on this module

    live = select(Bullet.id, Bullet.text, Bullet.scope, Bullet.status)
    if bullet_tokens(text):
        # By primary key alone: given the scope too, SQLite plans on the scope index and reads
        # every lesson of the scope.
        shortlist = Retriever.shared(session).candidates(session, text, scope, k=10)
        live = live.where(Bullet.id.in_(shortlist))
    else:
        # Only stop words and symbols, which the index does not hold: such texts are rare and
        # short, and the whole scope is compared as before.
        live = live.where(Bullet.scope == scope)
    rows = [
        (bullet_id, other)
        for bullet_id, other, other_scope, status in session.execute(live)
        if other_scope == scope and status in ("active", "proposed")
    ]
    best: tuple[str, float] | None = None
    for bullet_id, other in sorted(rows):
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
    return session.scalar(_VERSION) or 0


# Built once: every search asks, and building the statement costs more than running it.
_VERSION = select(PlaybookMeta.value).where(PlaybookMeta.key == "version")


def check_tags(value: object) -> list[str]:
    """Tags from a list or comma-separated text, normalised; FieldProblem when they cannot be."""
    if isinstance(value, str):
        items: list[str] = value.split(",")
    elif isinstance(value, list | tuple):
        items = []
        for item in value:
            if not isinstance(item, str):
                raise FieldProblem("tags", f"each tag must be text, not {fields.describe(item)}")
            items.append(item)
    else:
        raise FieldProblem(
            "tags", f"must be a list or comma-separated text, not {fields.describe(value)}"
        )
    # Made visible before the repeats are dropped: "x" and "x" with a zero-width space are one.
    tags = normalize_tags(fields.text(item, "tags", len(item)) for item in items)
    if len(tags) > fields.MAX_TAGS:
        raise FieldProblem("tags", f"has {len(tags)} tags, over the {fields.MAX_TAGS} allowed")
    for tag in tags:
        fields.text(tag, "tags", fields.TAG_CHARS)
    return tags


def check_status(value: object, allowed: Sequence[str] = STATUSES) -> str:
    """``value`` if it is one of ``allowed``; else FieldProblem naming the choices."""
    if not isinstance(value, str) or value.strip() not in allowed:
        shown = repr(value) if isinstance(value, str) else fields.describe(value)
        raise FieldProblem("status", f"{shown} is not one of {', '.join(allowed)}")
    return value.strip()


def check_fields(
    values: Mapping[str, Any], *, max_chars: int = fields.MAX_LESSON_CHARS
) -> dict[str, Any]:
    """A bullet's fields checked and normalised; FieldProblem names the first that does not fit.

    Every write of a bullet comes through here (add, edit, import), whichever door it came in
    by, so a bad value is refused with its field named before anything is written.
    ``max_chars`` is the longest lesson text (PLAYBOOK_MAX_LESSON_CHARS where settings apply).
    """
    cleaned: dict[str, Any] = {}
    for key, value in values.items():
        if key == "id":
            cleaned[key] = fields.bullet_id(value)
        elif key == "text":
            cleaned[key] = fields.text(
                value,
                "text",
                max_chars,
                required=True,
                empty="is empty; a bullet needs some text",
                limit_hint=" (PLAYBOOK_MAX_LESSON_CHARS); shorten it or split it in two",
            )
        elif key == "learned_from":
            if value is None:
                raise FieldProblem(key, LEARNED_FROM_MISSING)
            cleaned[key] = fields.text(
                value, key, fields.TICKET_KEY_CHARS, required=True, empty=_LEARNED_FROM_EMPTY
            )
        elif key in _REQUIRED_TEXT:
            cleaned[key] = fields.text(value, key, _REQUIRED_TEXT[key], required=True)
        elif key in _OPTIONAL_TEXT:
            kept = None if value is None else fields.text(value, key, _OPTIONAL_TEXT[key])
            cleaned[key] = kept or None
        elif key == "tags":
            cleaned[key] = check_tags(value)
        elif key == "status":
            cleaned[key] = check_status(value)
        elif key in TIME_FIELDS:
            cleaned[key] = (
                None if value is None and key == "demoted_on" else _check_time(key, value)
            )
        else:
            raise FieldProblem(key, "is not a field of a bullet")
    return cleaned


def _check_time(field: str, value: object) -> datetime:
    if isinstance(value, datetime):
        return clock.to_utc(value)
    if isinstance(value, date):
        # YAML reads an unquoted 2026-11-02 as a date: midnight UTC of that day.
        value = value.isoformat()
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise FieldProblem(
            field, f"must be a date such as 2026-11-02, not {fields.describe(value)}"
        )
    try:
        return clock.parse_time(value)
    except (ValueError, TypeError, OverflowError, OSError):
        raise FieldProblem(field, f"{value!r} is not a date such as 2026-11-02") from None


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
    scope: str | None = "global",
    section: str | None = "best_practice",
    status: str = "active",
    source: str | None = "cli",
    source_url: str | None = None,
    reason: str | None = None,
    max_chars: int = fields.MAX_LESSON_CHARS,
) -> AddResult:
    """Add a bullet with a new `pb-<n>` id, unless a near-duplicate already exists in its scope.

    Every field is checked first (FieldProblem names the bad one): ``learned_from`` must name
    a ticket, and the text may be at most ``max_chars`` long.
    """
    checked = check_fields(
        {
            "text": text,
            "learned_from": learned_from,
            "tags": tags if isinstance(tags, str) else list(tags or []),
            # Only None means "the default": an empty value is a mistake worth naming
            # (`--scope "$SCOPE"` with SCOPE unset), not a wish for `global`.
            "scope": "global" if scope is None else scope,
            "section": "best_practice" if section is None else section,
            "source": source,
            "source_url": source_url,
        },
        max_chars=max_chars,
    )
    status = check_status(status, ("proposed", "active"))
    text, scope = checked["text"], checked["scope"]
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
        section=checked["section"],
        tags=checked["tags"],
        scope=scope,
        learned_from=checked["learned_from"],
        source=checked["source"],
        source_url=checked["source_url"],
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
    """
    checked = [check_fields(values, max_chars=max_chars) for values in entries]
    ids: list[str] = []
    for values in checked:
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
    for values in checked:
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
    session: Session,
    bullet_id: str,
    *,
    actor: str,
    reason: str | None = None,
    max_chars: int = fields.MAX_LESSON_CHARS,
    **changes: Any,
) -> Change:
    """Change a bullet's text, tags, section, scope or provenance; None leaves a field as it is.

    The new values are checked like an added bullet's: an empty ``learned_from`` or a text
    longer than ``max_chars`` is refused with the field named, and nothing changes.
    """
    bullet = get(session, bullet_id)
    unknown = set(changes) - set(EDITABLE_FIELDS)
    if unknown:
        raise InvalidInput(f"cannot edit {', '.join(sorted(unknown))}")
    values = check_fields(
        {key: value for key, value in changes.items() if value is not None}, max_chars=max_chars
    )
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


def everything(session: Session) -> list[dict[str, Any]]:
    """Every bullet with its counters, as `as_dict` gives them."""
    return [as_dict(bullet) for bullet in session.scalars(select(Bullet))]


def changes_of(session: Session, actions: Sequence[str]) -> list[Revision]:
    """Every revision of the given actions (``deprecate``, ``restore``...), oldest first."""
    query = select(Revision).where(Revision.action.in_(list(actions))).order_by(Revision.id)
    return list(session.scalars(query))


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
    # A revision from before text was made visible on the way in may hold direction
    # controls: undoing a change must not bring them back.
    values = {
        key: characters.visible(value) if isinstance(value, str) else value
        for key, value in revision.before.items()
    }
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

"""Bullet lifecycle: add, edit, approve, deprecate, archive, restore, revert, with revisions."""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from playbook import clock, transitions
from playbook.errors import BulletNotFound, InvalidInput, InvalidTransition
from playbook.lessons import characters, fields, replacements, secrets
from playbook.lessons.checks import check_fields, check_status
from playbook.lessons.ids import sort_key
from playbook.models import Bullet, Revision
from playbook.outcomes.usage import COUNTER_FIELDS
from playbook.search.text import bullet_tokens, plain_words
from playbook.version import bump_version

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
    "superseded_by",
    "paths",
    "symbols",
)
# What a reader of a bullet sees (CLI --json, the agent API): its fields and its counters.
PUBLIC_FIELDS = ("id", *SNAPSHOT_FIELDS, "created_at", "updated_at", *COUNTER_FIELDS)
EDITABLE_FIELDS = (
    "text",
    "section",
    "tags",
    "scope",
    "learned_from",
    "source",
    "source_url",
    "paths",
    "symbols",
)
DUPLICATE_OVERLAP = 0.8
# A new lesson sharing this much of its words with a live one (but less than a near-duplicate)
# is created, and the answer names the other, which it may supersede. Measured on duplicate
# Jira summaries against unrelated ones of the same project: bench/similar_threshold.py.
SIMILAR_OVERLAP = 0.5
# A maintainer's edit, supersession or deprecation of a flagged lesson confirms the flag.
CLEARS_STALE = ("edit", "supersede", "deprecate")


@dataclass(frozen=True)
class Similar:
    """A live lesson that shares many words with a new one, without nearly duplicating it."""

    id: str
    overlap: float


@dataclass(frozen=True)
class AddResult:
    """What `add` did: created a bullet, or found a near-duplicate and created nothing.

    A created bullet may come with ``similar``: the live lesson of its scope it overlaps
    most, when that overlap is at least SIMILAR_OVERLAP.
    """

    bullet: Bullet
    created: bool
    overlap: float = 1.0
    similar: Similar | None = None


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
        elif value is not None and field in ("paths", "symbols"):
            value = list(value)  # a copy: the revision must not follow later edits
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
    """The live (active or proposed) bullet in ``scope`` that ``text`` nearly duplicates."""
    best = closest_live(session, text, scope)
    if best is None or best[1] < DUPLICATE_OVERLAP:
        return None
    return get(session, best[0]), best[1]


def closest_live(
    session: Session, text: str, scope: str, skip: Collection[str] = ()
) -> tuple[str, float] | None:
    """The live (active or proposed) bullet in ``scope`` (not in ``skip``) closest to ``text``.

    The search index shortlists the few live lessons most like ``text`` and the overlap rule
    is applied to those: a near-duplicate (or a similar lesson) shares many of its words with
    ``text``, so it ranks near the top, and an add costs the same at 100 lessons as at 100,000.
    """
    # The search index (and numpy) loads with the first check, not with every lesson command.
    from playbook.search.retrieval import Retriever

    live = select(Bullet.id, Bullet.text, Bullet.scope, Bullet.status)
    if bullet_tokens(text):
        # By primary key alone: given the scope too, SQLite plans on the scope index and reads
        # every lesson of the scope.
        shortlist = Retriever.shared(session).candidates(session, text, scope, k=10 + len(skip))
        live = live.where(Bullet.id.in_(shortlist))
    else:
        # Only stop words and symbols, which the index does not hold: such texts are rare and
        # short, and the whole scope is compared as before.
        live = live.where(Bullet.scope == scope)
    rows = [
        (bullet_id, other)
        for bullet_id, other, other_scope, status in session.execute(live)
        if other_scope == scope and status in ("active", "proposed") and bullet_id not in skip
    ]
    best: tuple[str, float] | None = None
    for bullet_id, other in sorted(rows):
        overlap = word_overlap(text, other)
        if overlap > 0 and (best is None or overlap > best[1]):
            best = (bullet_id, overlap)
    return best


# Told each lesson created or changed, in the writer's transaction (the bot queues the
# lesson's embedding job here, so it commits or rolls back with the change itself).
change_listeners: list[Callable[[Session, Bullet], None]] = []


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
    for listener in change_listeners:
        listener(session, bullet)
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
    replacing: Collection[str] = (),
    paths: Iterable[str] | str | None = None,
    symbols: Iterable[str] | str | None = None,
) -> AddResult:
    """Add a bullet with a new `pb-<n>` id, unless a near-duplicate already exists in its scope.

    Every field is checked first (FieldProblem names the bad one): ``learned_from`` must name
    a ticket, and the text may be at most ``max_chars`` long. ``replacing`` names the lessons
    the new one is about to supersede (a consolidation's members): nearly duplicating them is
    the point, so they are not compared. ``paths`` and ``symbols`` anchor it to code
    (`playbook.anchors.fields`); None leaves it unanchored.
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
            "paths": paths if paths is None or isinstance(paths, str) else list(paths),
            "symbols": symbols if symbols is None or isinstance(symbols, str) else list(symbols),
        },
        max_chars=max_chars,
    )
    status = check_status(status, ("proposed", "active"))
    text, scope = checked["text"], checked["scope"]
    version = bump_version(session)
    closest = closest_live(session, text, scope, skip=frozenset(replacing))
    if closest is not None and closest[1] >= DUPLICATE_OVERLAP:
        # The version bump above stays: a spurious cache refresh is cheaper than a race.
        return AddResult(bullet=get(session, closest[0]), created=False, overlap=closest[1])
    similar = None
    if closest is not None and closest[1] >= SIMILAR_OVERLAP:
        similar = Similar(closest[0], round(closest[1], 3))
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
        paths=checked["paths"],
        symbols=checked["symbols"],
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
    return AddResult(bullet=bullet, created=True, similar=similar)


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
    with session.no_autoflush:
        # The playbook's version row first, then the lesson's: every lesson writer (and `add`)
        # takes the two locks in this one order on PostgreSQL, so none waits on another in a
        # cycle. Without no_autoflush the new values would be written (and locked) first.
        version = bump_version(session)
        # The one place a lesson's status is written: conditional on the status the caller
        # decided on, so of twenty concurrent restores one writes and the others get a 409
        # (Conflict) instead of each adding a `restore` revision.
        if bullet.status != before["status"] and not transitions.claim(
            session, bullet, before["status"], bullet.status
        ):
            # The values set above must not be flushed by a caller that goes on after the
            # Conflict: read again, the lesson is as the winner left it.
            session.expire(bullet)
            raise transitions.conflict(bullet.id, before["status"])
    bullet.updated_at = clock.now()
    bullet.version = version
    if action in CLEARS_STALE and bullet.stale_since is not None:
        reason = cleared_note(bullet, reason)
        unflag(bullet)
    return Change(bullet, _record(session, bullet, action, actor, reason, before))


def edit(
    session: Session,
    bullet_id: str,
    *,
    actor: str,
    reason: str | None = None,
    max_chars: int = fields.MAX_LESSON_CHARS,
    **changes: Any,
) -> Change:
    """Change a bullet's text, tags, section, scope, provenance or anchors; None leaves a field
    as it is (and an empty ``paths`` or ``symbols`` clears it).

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
    if "scope" in values:
        # A lesson linked by supersession stays with its links: a move would leave one of
        # them pointing into another owner's scope.
        replacing = bullet.superseded_by if bullet.status == replacements.SUPERSEDED else None
        replacements.check_move(session, bullet, values["scope"], replacing)
    return _apply(session, bullet, "edit", actor, reason, **values)


def cleared_note(bullet: Bullet, reason: str | None) -> str:
    """What a revision that clears the stale flag says: the flag's PR, after ``reason``."""
    note = f"stale flag cleared ({bullet.stale_pr or 'no PR'})"
    return f"{reason}; {note}" if reason else note


def unflag(bullet: Bullet) -> None:
    """Forget the stale flag's fields (`playbook.anchors.stale`; the revisions keep them)."""
    bullet.stale_since = None
    bullet.stale_detail = None
    bullet.stale_pr = None


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

    A superseded bullet is left as it is (out of retrieval, linked to its replacement).

    ``reason`` becomes the bullet's ``demoted_reason``; ``note`` (default: the reason)
    is what the revision says, e.g. which PR caused the demotion.
    """
    bullet = get(session, bullet_id)
    if not (reason or "").strip():
        raise InvalidInput("deprecating a bullet needs a reason")
    if bullet.status in ("deprecated", replacements.SUPERSEDED):
        # Superseded is out of retrieval already, and keeps the link to its replacement.
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
    """Archive a bullet (e.g. pruned as unused); it is kept and can be restored.

    A superseded bullet is left as it is, linked to its replacement, until restored.
    """
    bullet = get(session, bullet_id)
    if not (reason or "").strip():
        raise InvalidInput("archiving a bullet needs a reason")
    if bullet.status in ("archived", replacements.SUPERSEDED):
        # A superseded lesson stays so, linked to its replacement, until someone restores it.
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


def supersede(
    session: Session, bullet_id: str, by: str, *, actor: str, reason: str | None = None
) -> Change:
    """Mark ``bullet_id`` superseded by the live lesson ``by``: it leaves retrieval, kept.

    The replaced lesson's revision says by which; the replacement gets a revision too (its
    fields unchanged) so both histories tell it. `restore` undoes it. InvalidTransition
    (see `replacements.check`) when ``by`` cannot replace it, among them
    `replacements.OtherScope` when it is of another scope than the lesson and not global.
    """
    bullet = get(session, bullet_id)
    new = replacements.check(session, bullet.id, fields.bullet_id(by, "by"))
    if bullet.status == replacements.SUPERSEDED:
        if bullet.superseded_by == new.id:
            return Change(bullet, None)
        raise InvalidTransition(
            f"{bullet.id} is already superseded by {bullet.superseded_by}; restore {bullet.id} "
            f"first to supersede it by {new.id}"
        )
    why = fields.text(reason or "", "reason", fields.REASON_CHARS) or None
    change = _apply(
        session,
        bullet,
        "supersede",
        actor,
        f"superseded by {new.id}" + (f": {why}" if why else ""),
        status=replacements.SUPERSEDED,
        superseded_by=new.id,
        demoted_on=clock.now(),
        demoted_reason=why or f"superseded by {new.id}",
    )
    unchanged = snapshot(new)
    note = f"supersedes {bullet.id}" + (f": {why}" if why else "")
    _record(session, new, "replace", actor, note, unchanged)
    return change


def restore(session: Session, bullet_id: str, *, actor: str, reason: str | None = None) -> Change:
    """Bring a deprecated, archived or superseded bullet back to active, clearing its demotion
    (and its replacement)."""
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
        superseded_by=None,
    )


def everything(
    session: Session, *, status: str | None = None, scope: str | None = None
) -> list[dict[str, Any]]:
    """Every bullet (of ``status`` and ``scope``, when given) with its counters, as `as_dict`
    gives them, in id order. The filters are the query's: a playbook of 20,000 lessons lists
    its few proposed ones without reading the rest."""
    query = select(Bullet)
    if status is not None:
        query = query.where(Bullet.status == status)
    if scope is not None:
        query = query.where(Bullet.scope == scope)
    rows = [as_dict(bullet) for bullet in session.scalars(query)]
    rows.sort(key=lambda row: sort_key(row["id"]))
    return rows


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
    # Undoing the edit that took a credential out must not put it back.
    for field in ("text", "source_url"):
        secrets.refuse(field, values.get(field))
    scope = values.get("scope") or bullet.scope
    if values.get("status", bullet.status) != replacements.SUPERSEDED:
        values["superseded_by"] = None  # revisions older than supersession do not name it
    elif values.get("superseded_by") != bullet.superseded_by:
        # Back to superseded: only by a lesson that may still replace it (live, no cycle, of
        # the scope the lesson is back in or global).
        replacements.check(session, bullet.id, values.get("superseded_by") or "", scope)
    # Back in an older scope: not away from the lessons it is linked with.
    replacements.check_move(
        session, bullet, scope, values.get("superseded_by", bullet.superseded_by)
    )
    return _apply(session, bullet, "revert", actor, why, **values)


def as_of(session: Session, when: datetime) -> list[dict[str, Any]]:
    """What the playbook said at ``when``: each bullet's values after its last revision by then."""
    rows = session.scalars(
        select(Revision).where(Revision.at <= clock.to_utc(when)).order_by(Revision.id)
    )
    state: dict[str, dict[str, Any]] = {}
    # Revisions made before a field existed do not name it: it was empty then.
    empty = dict.fromkeys(SNAPSHOT_FIELDS)
    for revision in rows:
        if revision.after is not None:
            state[revision.bullet_id] = {"id": revision.bullet_id, **empty, **revision.after}
    return [state[key] for key in sorted(state, key=sort_key)]

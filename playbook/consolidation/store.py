"""Consolidation proposals: propose, redraft, accept, reject and undo, in the caller's session.

A proposal names a group of active lessons of one scope and a merged text (the draft).
Accepting it creates the merged lesson and supersedes every member by it, so a member's
history, usage and `learned_from` stay reachable and a cite of its id still counts; undo
restores the members and archives the merged lesson. Nothing here commits: the caller's
transaction holds every change, and any error leaves nothing behind.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from playbook import clock, transitions
from playbook.consolidation.groups import Group, common_terms
from playbook.consolidation.terms import dropped_terms
from playbook.errors import Conflict, ConsolidationNotFound, InvalidTransition
from playbook.lessons import fields, ids, lifecycle, replacements
from playbook.lessons.checks import check_fields, check_status
from playbook.models import Bullet, Consolidation

STATUSES = ("open", "accepted", "rejected", "undone", "stale")
DRAFT_SOURCES = ("longest", "model", "edited")
# Statuses that keep a group from being proposed again while its members stay as they were.
_SETTLED = ("open", "rejected", "undone")
ACTOR_CHARS = 200
MODEL_CHARS = 200
MAX_LISTED = 1_000


def members_hash(bullets: Iterable[Bullet]) -> str:
    """sha256 over the members' (id, text), in id order: changes when any member's text does."""
    digest = hashlib.sha256()
    for bullet in sorted(bullets, key=lambda b: ids.sort_key(b.id)):
        for part in (bullet.id, bullet.text):
            encoded = part.encode("utf-8")
            # Length-prefixed, so no two lists of texts hash alike by moving a boundary.
            digest.update(len(encoded).to_bytes(8, "big") + encoded)
    return digest.hexdigest()


def group_key(member_ids: Iterable[str]) -> str:
    """sha256 of the members' ids in id order: the same group whatever order it is named in."""
    ordered = sorted(set(member_ids), key=ids.sort_key)
    return hashlib.sha256("\n".join(ordered).encode("utf-8")).hexdigest()


def scope_lessons(session: Session, scope: str) -> list[tuple[str, str]]:
    """The active lessons (id, text) of ``scope``, in id order: what `find_groups` takes."""
    rows = session.execute(
        select(Bullet.id, Bullet.text).where(Bullet.scope == scope, Bullet.status == "active")
    )
    return sorted(((i, t) for i, t in rows), key=lambda row: ids.sort_key(row[0]))


def get(session: Session, consolidation_id: int | str) -> Consolidation:
    """The consolidation with this id (a number, or its digits), else ConsolidationNotFound."""
    number: int | None
    if isinstance(consolidation_id, bool):
        number = None
    elif isinstance(consolidation_id, int):
        number = consolidation_id
    else:
        number = ids.number(str(consolidation_id).strip())
    found = session.get(Consolidation, number) if number is not None and number > 0 else None
    if found is None:
        raise ConsolidationNotFound(str(consolidation_id)[:40])
    return found


def listing(
    session: Session, *, status: str | None = None, scope: str | None = None, limit: int = 100
) -> list[Consolidation]:
    """Consolidations, newest first, of one status and scope when given."""
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LISTED:
        raise fields.FieldProblem("limit", f"must be a whole number from 1 to {MAX_LISTED}")
    query = select(Consolidation)
    if status is not None:
        query = query.where(Consolidation.status == check_status(status, STATUSES))
    if scope is not None:
        query = query.where(Consolidation.scope == fields.text(scope, "scope", fields.SCOPE_CHARS))
    return list(session.scalars(query.order_by(Consolidation.id.desc()).limit(limit)))


def _members(session: Session, member_ids: Sequence[str]) -> list[Bullet]:
    """The member lessons that still exist, in id order."""
    found = session.scalars(select(Bullet).where(Bullet.id.in_(list(member_ids))))
    return sorted(found, key=lambda b: ids.sort_key(b.id))


def _longest(bullets: Sequence[Bullet]) -> Bullet:
    """The member with the longest text (the first in id order among equals)."""
    return max(reversed(bullets), key=lambda b: len(b.text))


def _iso(value: datetime | None) -> str | None:
    return clock.to_utc(value).isoformat() if value is not None else None


def propose(
    session: Session,
    scope: str,
    groups: Sequence[Group],
    *,
    now: datetime | None = None,
    dry_run: bool = False,
) -> list[Consolidation]:
    """Propose one consolidation per new group of ``scope``; the new proposals.

    A group is left out when a member is no longer active, or when the same members with the
    same texts are open, rejected or undone already: a rejected group comes back only once a
    member has changed. An open proposal of the same group whose members changed, or one that
    shares a member with a new group, is marked stale. The draft is the longest member's text
    (``draft_source`` "longest"), for a person or a model to improve. ``dry_run`` builds the
    proposals without adding them or changing any.
    """
    when = now or clock.now()
    if not dry_run:
        _stale_changed(session, scope, when)
    texts = [text for _, text in scope_lessons(session, scope)]
    common = common_terms(texts)
    opened: list[Consolidation] = []
    for group in groups:
        members = _members(session, group.member_ids)
        if len(members) < 2 or len(members) != len(set(group.member_ids)):
            continue
        if any(b.status != "active" or b.scope != scope for b in members):
            continue
        key, digest = group_key(b.id for b in members), members_hash(members)
        earlier = list(
            session.scalars(
                select(Consolidation).where(
                    Consolidation.group_key == key, Consolidation.status.in_(_SETTLED)
                )
            )
        )
        if any(c.members_hash == digest for c in earlier):
            continue
        if not dry_run:
            for old in earlier:
                if old.status == "open":
                    _close(session, old, "stale", when, None, "a member changed", strict=False)
            _stale_overlapping(session, scope, members, when)
        draft = _longest(members).text
        proposal = Consolidation(
            scope=scope,
            member_ids=[b.id for b in members],
            group_key=key,
            members_hash=digest,
            draft=draft,
            draft_source="longest",
            model=None,
            dropped_terms=dropped_terms({b.id: b.text for b in members}, draft, common),
            saves_chars=sum(len(b.text) for b in members) - len(draft),
            similarity=float(group.similarity),
            status="open",
            created_at=when,
        )
        if not dry_run:
            session.add(proposal)
            session.flush()
        opened.append(proposal)
    return opened


def _stale_changed(session: Session, scope: str, when: datetime) -> None:
    """Mark stale the open proposals of ``scope`` whose members are no longer as proposed."""
    for other in list(
        session.scalars(
            select(Consolidation).where(
                Consolidation.scope == scope, Consolidation.status == "open"
            )
        )
    ):
        problem = _changed_member(other, _members(session, other.member_ids))
        if problem is not None:
            _close(session, other, "stale", when, None, problem, strict=False)


def _stale_overlapping(
    session: Session, scope: str, members: Sequence[Bullet], when: datetime
) -> None:
    """Mark stale the open proposals of ``scope`` sharing a member with a new group."""
    wanted = {b.id for b in members}
    for other in list(
        session.scalars(
            select(Consolidation).where(
                Consolidation.scope == scope, Consolidation.status == "open"
            )
        )
    ):
        shared = sorted(wanted & set(other.member_ids), key=ids.sort_key)
        if shared:
            now_ids = ", ".join(sorted(wanted, key=ids.sort_key))
            why = f"the group changed: now {now_ids}"
            _close(session, other, "stale", when, None, why, strict=False)


def _close(
    session: Session,
    consolidation: Consolidation,
    status: str,
    when: datetime,
    actor: str | None,
    why: str | None,
    *,
    strict: bool = True,
) -> bool:
    """The one place a consolidation's status is written: conditional on the status it was
    read with, so of concurrent decisions one wins and the others get Conflict (a 409).

    Not ``strict`` (marking a proposal stale on the way): a proposal someone decided on
    meanwhile is left as they left it, and False says so.
    """
    expected = consolidation.status
    if strict:
        transitions.require(
            session, consolidation, expected, status, what=f"consolidation {consolidation.id}"
        )
    elif not transitions.claim(session, consolidation, expected, status):
        session.expire(consolidation)  # read again, as the winner left it, when next used
        return False
    consolidation.status = status
    consolidation.decided_at = when
    consolidation.decided_by = actor
    consolidation.reason = why
    return True


def _require(consolidation: Consolidation, status: str, action: str) -> None:
    """InvalidTransition, saying what to do, unless ``consolidation`` has ``status``."""
    if consolidation.status == status:
        return
    advice = {
        "stale": "its members changed; run consolidate again for a fresh proposal",
        "accepted": f"it made {consolidation.merged_id}; undo it first",
        "rejected": "a member must change before the group is proposed again",
        "undone": "its members are back; the group is proposed again once a member changes",
        "open": "accept or reject it first",
    }.get(consolidation.status, "run consolidate again")
    raise InvalidTransition(
        f"consolidation {consolidation.id} is {consolidation.status}, not {status}, so it "
        f"cannot be {action}; {advice}"
    )


def _actor(actor: str) -> str:
    return fields.text(actor, "actor", ACTOR_CHARS, required=True)


def _reason(reason: str | None) -> str | None:
    if reason is None:
        return None
    return fields.text(reason, "reason", fields.REASON_CHARS) or None


def _check_text(text: str, max_chars: int) -> str:
    """A merged text checked as a lesson's text is (empty, too long, holding a credential)."""
    return check_fields({"text": text}, max_chars=max_chars)["text"]


def _changed_member(consolidation: Consolidation, members: Sequence[Bullet]) -> str | None:
    """Why the members are not as proposed (gone, no longer active, moved to another scope,
    edited); None if they are."""
    present = {b.id: b for b in members}
    for bullet_id in consolidation.member_ids:
        bullet = present.get(bullet_id)
        if bullet is None:
            return f"{bullet_id} no longer exists"
        if bullet.status != "active":
            return f"{bullet_id} is {bullet.status} since the proposal"
        # The text hash does not see a move: a member now of another scope (another owner's,
        # perhaps) would be superseded by a lesson its readers cannot read, and the merged
        # text would carry its words into the group's scope.
        if bullet.scope != consolidation.scope:
            return f"{bullet_id} is no longer in the scope {consolidation.scope}"
    if members_hash(members) == consolidation.members_hash:
        return None
    created = clock.to_utc(consolidation.created_at)
    edited = [b.id for b in members if clock.to_utc(b.updated_at) > created]
    return f"{(edited or ['a member'])[0]} changed since the proposal"


def set_draft(
    session: Session,
    consolidation_id: int | str,
    text: str,
    *,
    source: str,
    model: str | None,
    max_chars: int = fields.MAX_LESSON_CHARS,
) -> Consolidation:
    """Replace an open proposal's draft (a model's merge, or a person's edit).

    The text is checked as a lesson's text is; the dropped terms and the characters saved
    are measured again against it.
    """
    consolidation = get(session, consolidation_id)
    _require(consolidation, "open", "redrafted")
    if source not in DRAFT_SOURCES:
        raise fields.FieldProblem("source", f"{source!r} is not one of {', '.join(DRAFT_SOURCES)}")
    draft = _check_text(text, max_chars)
    # Still open in the database, and locked until this transaction ends: a model's draft
    # arriving while someone accepts the proposal must not replace the text they accepted.
    transitions.require(
        session, consolidation, "open", "open", what=f"consolidation {consolidation.id}"
    )
    members = _members(session, consolidation.member_ids)
    texts = [t for _, t in scope_lessons(session, consolidation.scope)]
    consolidation.draft = draft
    consolidation.draft_source = source
    consolidation.model = None if model is None else fields.text(model, "model", MODEL_CHARS)
    consolidation.dropped_terms = dropped_terms(
        {b.id: b.text for b in members}, draft, common_terms(texts)
    )
    consolidation.saves_chars = sum(len(b.text) for b in members) - len(draft)
    session.flush()
    return consolidation


def accept(
    session: Session,
    consolidation_id: int | str,
    *,
    actor: str,
    text: str | None = None,
    reason: str | None = None,
    max_chars: int = fields.MAX_LESSON_CHARS,
) -> Consolidation:
    """Create the merged lesson (the draft, or ``text`` as edited) and supersede each member.

    Only an open proposal whose members are all still active, unchanged and of its scope can
    be accepted; otherwise InvalidTransition says which member changed. The merged lesson is
    active, in the group's scope, learned from the longest member's ticket, with the members'
    tags.
    """
    consolidation = get(session, consolidation_id)
    _require(consolidation, "open", "accepted")
    who = _actor(actor)
    members = _members(session, consolidation.member_ids)
    problem = _changed_member(consolidation, members)
    if problem is not None:
        raise InvalidTransition(f"{problem}; run consolidate again")
    why = None if reason is None else fields.text(reason, "reason", fields.REASON_CHARS)
    if text is not None:
        edited = _check_text(text, max_chars)
        if edited != consolidation.draft:
            # Measured again, so the proposal records what the accepted text saves and drops.
            set_draft(session, consolidation.id, edited, source="edited", model=None)
    decided = consolidation.draft
    # Decided before any lesson is written: a concurrent accept waits here and loses, and
    # takes no lesson's lock in the meantime.
    _close(session, consolidation, "accepted", clock.now(), who, why or None)
    # The row is ours now: a model's draft committed since it was read would make the
    # merged lesson a text nobody accepted, so the accept is refused instead.
    session.flush()
    session.refresh(consolidation, ["draft"])
    if consolidation.draft != decided:
        raise Conflict(
            f"consolidation {consolidation.id}'s draft changed while this request ran; "
            "read the new draft and accept it, or accept with your text"
        )
    longest = _longest(members)
    learned = [longest.learned_from, *(b.learned_from for b in members)]
    tags = list(dict.fromkeys(tag for b in members for tag in b.tags or []))
    tags = [tag for tag in tags if len(tag) <= fields.TAG_CHARS][: fields.MAX_TAGS]
    member_ids = [b.id for b in members]
    result = lifecycle.add(
        session,
        consolidation.draft,
        learned_from=next((x for x in learned if x), f"consolidation {consolidation.id}"),
        actor=who,
        tags=tags,
        scope=consolidation.scope,
        section=longest.section,
        status="active",
        source="consolidation",
        reason=f"consolidation {consolidation.id} of {', '.join(member_ids)}",
        max_chars=max_chars,
        replacing=member_ids,
    )
    merged = result.bullet
    if not result.created:
        raise InvalidTransition(
            f"the merged text nearly duplicates {merged.id}, which is not in the group; edit "
            f"the text, or supersede {merged.id} first"
        )
    for bullet_id in member_ids:
        lifecycle.supersede(
            session,
            bullet_id,
            merged.id,
            actor=who,
            reason=f"consolidated into {merged.id} (consolidation {consolidation.id})",
        )
    consolidation.merged_id = merged.id
    session.flush()
    return consolidation


def reject(
    session: Session, consolidation_id: int | str, *, actor: str, reason: str | None = None
) -> Consolidation:
    """Reject an open proposal: its group is not proposed again until a member changes."""
    consolidation = get(session, consolidation_id)
    _require(consolidation, "open", "rejected")
    _close(session, consolidation, "rejected", clock.now(), _actor(actor), _reason(reason))
    session.flush()
    return consolidation


def undo(
    session: Session, consolidation_id: int | str, *, actor: str, reason: str | None = None
) -> Consolidation:
    """Undo an accepted consolidation: its members active again, the merged lesson archived.

    Only members still superseded by the merged lesson come back (one restored or replaced
    since is left as it is).
    """
    consolidation = get(session, consolidation_id)
    _require(consolidation, "accepted", "undone")
    who, why = _actor(actor), _reason(reason)
    merged_id = consolidation.merged_id or ""
    note = f"consolidation {consolidation.id} undone" + (f": {why}" if why else "")
    # Decided before any member is restored: of twenty concurrent undos one goes on, the
    # others get Conflict, and each member's history says `restore` once.
    _close(session, consolidation, "undone", clock.now(), who, why)
    for bullet_id in replacements.superseded_by_it(
        session, merged_id, Bullet.id.in_(list(consolidation.member_ids))
    ):
        lifecycle.restore(session, bullet_id, actor=who, reason=note)
    if session.get(Bullet, merged_id) is not None:
        lifecycle.archive(session, merged_id, reason=note, actor=who)
    session.flush()
    return consolidation


def as_dict(consolidation: Consolidation, members: bool = True) -> dict[str, Any]:
    """A consolidation as the API, the CLI and the page show it (JSON-ready).

    With ``members``, each member's current id, text, learned_from and status.
    """
    values: dict[str, Any] = {
        "id": consolidation.id,
        "scope": consolidation.scope,
        "status": consolidation.status,
        "member_ids": list(consolidation.member_ids),
        "draft": consolidation.draft,
        "draft_source": consolidation.draft_source,
        "model": consolidation.model,
        "saves_chars": consolidation.saves_chars,
        "similarity": round(consolidation.similarity, 4),
        "dropped_terms": dict(consolidation.dropped_terms or {}),
        "merged_id": consolidation.merged_id,
        "created_at": _iso(consolidation.created_at),
        "decided_at": _iso(consolidation.decided_at),
        "decided_by": consolidation.decided_by,
        "reason": consolidation.reason,
    }
    if members:
        session = Session.object_session(consolidation)
        found = {b.id: b for b in _members(session, consolidation.member_ids)} if session else {}
        values["members"] = [
            {
                "id": bullet_id,
                "text": found[bullet_id].text if bullet_id in found else None,
                "learned_from": found[bullet_id].learned_from if bullet_id in found else None,
                "status": found[bullet_id].status if bullet_id in found else None,
            }
            for bullet_id in consolidation.member_ids
        ]
    return values

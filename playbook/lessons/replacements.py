"""Which lesson replaces which: the rules of supersession, and the lookups both ways.

A superseded lesson names its replacement in ``superseded_by``. The replacement must be live
(active or proposed) when the link is made, so no chain of replacements ever comes back to
where it started; imports may still bring any link, so every walk here is bounded.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from sqlalchemy import ColumnElement, select
from sqlalchemy.orm import Session

from playbook import clock
from playbook.errors import BulletNotFound, InvalidTransition
from playbook.lessons.fields import FieldProblem
from playbook.lessons.ids import sort_key
from playbook.models import Bullet
from playbook.scopes import GLOBAL

SUPERSEDED = "superseded"
LIVE = ("active", "proposed")
# Replacements followed at most from one lesson: far more than any team chains by hand.
MAX_CHAIN = 50


class OtherScope(InvalidTransition):
    """The replacement is of a scope whose readers are not the replaced lesson's readers."""

    field = "by"  # the request field at fault: the replacement


def may_replace(old_scope: str, new_scope: str) -> bool:
    """True when a lesson of ``new_scope`` may replace one of ``old_scope``.

    Only one of the same scope, or a global one: every reader of the replaced lesson can then
    read its replacement, so ``superseded_by`` never names a lesson of another owner. A global
    lesson is replaced only by a global one (its readers are every scope).
    """
    return new_scope in (old_scope, GLOBAL)


def check_move(session: Session, bullet: Bullet, scope: str, replacement: str | None) -> None:
    """FieldProblem (of the field ``scope``) when moving ``bullet`` to ``scope`` would link
    lessons of different scopes: its ``replacement`` (the lesson replacing it after the change,
    None when none), or a lesson it replaces, would stay behind."""
    if scope == bullet.scope:
        return
    if replacement:
        new = session.get(Bullet, replacement)
        if new is not None and not may_replace(scope, new.scope):
            raise FieldProblem(
                "scope",
                f"{bullet.id} is superseded by {new.id} of scope {new.scope}; restore "
                f"{bullet.id} before moving it to {scope}",
            )
    for old in session.scalars(
        select(Bullet).where(Bullet.superseded_by == bullet.id, Bullet.status == SUPERSEDED)
    ):
        if not may_replace(old.scope, scope):
            raise FieldProblem(
                "scope",
                f"{bullet.id} replaces {old.id} of scope {old.scope}; restore {old.id} before "
                f"moving {bullet.id} to {scope}",
            )


def chain(session: Session, bullet: Bullet) -> list[str]:
    """The ids that replace ``bullet``, nearest first (empty when it is not superseded)."""
    found: list[str] = []
    current = bullet
    while current.status == SUPERSEDED and current.superseded_by and len(found) < MAX_CHAIN:
        if current.superseded_by in found or current.superseded_by == bullet.id:
            break  # an imported loop: stop where it closes
        found.append(current.superseded_by)
        following = session.get(Bullet, current.superseded_by)
        if following is None:
            break
        current = following
    return found


def check(session: Session, old_id: str, new_id: str, old_scope: str | None = None) -> Bullet:
    """The lesson ``new_id`` names, when it may replace ``old_id`` (of ``old_scope`` when
    given: the scope it is given in the same change; else its own).

    BulletNotFound (of the field ``by``) when there is none; InvalidTransition, saying what
    to do instead, when it is ``old_id`` itself, is not live, or would close a cycle;
    OtherScope (of the field ``by``) when it is of another scope (`may_replace`).
    """
    new = session.get(Bullet, new_id)
    if new is None:
        raise BulletNotFound(new_id, field="by")
    if new.id == old_id:
        raise InvalidTransition(f"{old_id} cannot supersede itself; name the lesson replacing it")
    if old_scope is None:
        old = session.get(Bullet, old_id)
        old_scope = old.scope if old is not None else new.scope
    if not may_replace(old_scope, new.scope):
        raise OtherScope(
            f"{new.id} is of scope {new.scope} and {old_id} of scope {old_scope}: a lesson is "
            "superseded only by one of its own scope or a global one"
        )
    if new.status == SUPERSEDED:
        after = chain(session, new)
        if old_id in after:
            path = " -> ".join([new.id, *after[: after.index(old_id) + 1]])
            raise InvalidTransition(
                f"{new.id} is superseded by {old_id} already ({path}): superseding {old_id} "
                "by it would make a cycle"
            )
        raise InvalidTransition(
            f"{new.id} is itself superseded by {new.superseded_by}; supersede {old_id} by "
            "a live lesson"
        )
    if new.status not in LIVE:
        raise InvalidTransition(
            f"{new.id} is {new.status}: a lesson is superseded only by an active or proposed "
            f"one; restore {new.id} first"
        )
    return new


def superseded_by_it(session: Session, bullet_id: str, *where: ColumnElement[bool]) -> list[str]:
    """The lessons ``bullet_id`` replaces now (those matching ``where`` too), by id."""
    rows = session.scalars(
        select(Bullet.id).where(
            Bullet.superseded_by == bullet_id, Bullet.status == SUPERSEDED, *where
        )
    )
    return sorted(rows, key=sort_key)


def live_replacements(
    session: Session, bullet_ids: Iterable[str], at: datetime | None = None
) -> dict[str, str]:
    """For each of ``bullet_ids`` superseded by ``at`` (default now), its live replacement.

    The chain is followed to its end (pb-3 replaced by pb-9, itself replaced by pb-12: pb-12);
    a lesson whose last replacement is not live or not of its scope (nor global), or that was
    superseded after ``at`` (a cite made before the change), has none.
    """
    when = clock.to_utc(at) if at is not None else clock.now()
    ids = list(dict.fromkeys(bullet_ids))
    if not ids:
        return {}
    found: dict[str, str] = {}
    superseded = session.scalars(
        select(Bullet).where(Bullet.id.in_(ids), Bullet.status == SUPERSEDED)
    )
    for bullet in superseded:
        if bullet.demoted_on is not None and clock.to_utc(bullet.demoted_on) > when:
            continue
        after = chain(session, bullet)
        last = session.get(Bullet, after[-1]) if after else None
        # A link across scopes (older than the rule, or imported) is not followed: a cite in
        # one owner's work never counts for another owner's lesson.
        if last is not None and last.status in LIVE and may_replace(bullet.scope, last.scope):
            found[bullet.id] = last.id
    return found

"""The side-effect log read back: what each delivery did, and the comments it could not post."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import and_, exists, or_, select
from sqlalchemy.orm import Session, aliased

from playbook import clock
from playbook.deliveries import comments
from playbook.models import SideEffect

# The actions that post or edit one of the bot's comments.
COMMENT_ACTIONS = ("comment", "edit_comment")


def record(
    session: Session,
    *,
    delivery_guid: str | None,
    target: str,
    action: str,
    ticket_key: str,
    status: str,
    detail: str | None = None,
    body: str | None = None,
    purpose: str | None = None,
    bullet_ids: list[str] | None = None,
    installation_id: int | None = None,
) -> SideEffect:
    """Append one line to the side-effect log, in the caller's transaction."""
    effect = SideEffect(
        delivery_id=delivery_guid,
        target=target,
        action=action,
        ticket_key=ticket_key,
        status=status,
        detail=detail,
        at=clock.now(),
        body=body,
        purpose=purpose,
        bullet_ids=bullet_ids,
        installation_id=installation_id,
    )
    session.add(effect)
    return effect


def for_deliveries(session: Session, delivery_guids: Sequence[str]) -> dict[str, list[SideEffect]]:
    """Each delivery's side effects (by delivery GUID), oldest first; every GUID asked is a key."""
    found: dict[str, list[SideEffect]] = {guid: [] for guid in delivery_guids}
    if not found:
        return found
    rows = session.scalars(
        select(SideEffect)
        .where(SideEffect.delivery_id.in_(list(found)))
        .order_by(SideEffect.at, SideEffect.id)
    )
    for row in rows:
        found[row.delivery_id or ""].append(row)
    return found


def unposted(session: Session, delivery_guid: str) -> list[SideEffect]:
    """The comments a delivery skipped (no credentials) that were not posted since, oldest first.

    A skipped comment with its text kept is left to post until a later `done` comment or
    edit exists for the same ticket and purpose (a repost, or a later delivery's comment),
    or a later skipped one kept newer text for it (posting the older text would post
    lessons already replaced), or the comment on record already says exactly its text.
    """
    later = aliased(SideEffect)
    replaced = exists().where(
        later.action.in_(COMMENT_ACTIONS),
        later.target == SideEffect.target,
        later.ticket_key == SideEffect.ticket_key,
        later.purpose == SideEffect.purpose,
        later.id > SideEffect.id,
        or_(later.status == "done", and_(later.status == "skipped", later.body.is_not(None))),
    )
    rows = session.scalars(
        select(SideEffect)
        .where(
            SideEffect.delivery_id == delivery_guid,
            SideEffect.status == "skipped",
            SideEffect.action.in_(COMMENT_ACTIONS),
            SideEffect.body.is_not(None),
            SideEffect.purpose.is_not(None),
            SideEffect.ticket_key.is_not(None),
            ~replaced,
        )
        .order_by(SideEffect.id)
    )
    return [row for row in rows if not _on_record(session, row)]


def slot_of(effect: SideEffect) -> tuple[str, str, str]:
    """The comment slot an effect is about: (target, ticket key, purpose)."""
    return effect.target, effect.ticket_key or "", effect.purpose or ""


def _on_record(session: Session, effect: SideEffect) -> bool:
    """Whether the ticket's comment already says this text (posted before the skip)."""
    target, ticket_key, purpose = slot_of(effect)
    slot = comments.find(session, target, ticket_key, purpose)
    return (
        slot is not None
        and slot.state == "posted"
        and slot.external_id is not None
        and slot.body == effect.body
    )

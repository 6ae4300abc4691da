"""What handlers share: effect() around any outside call, publish() for the bot's comments."""

from __future__ import annotations

import logging
import os
import socket
import threading
from collections.abc import Callable
from contextlib import suppress
from datetime import timedelta
from typing import TYPE_CHECKING, TypeVar

from sqlalchemy.orm import Session

from bot import claims, metrics
from bot.effects import CommentText, TicketRef, log_effect
from bot.github import NotConfigured
from bot.outcomes import Deferred, Ignored, PermanentError
from playbook import db
from playbook.deliveries import comments

if TYPE_CHECKING:
    from bot.services import Services

log = logging.getLogger(__name__)
T = TypeVar("T")

__all__ = ["Ignored", "PermanentError", "effect", "publish"]


def effect(
    services: Services,
    ref: TicketRef,
    action: str,
    call: Callable[[], T],
    *,
    comment: CommentText | None = None,
) -> tuple[bool, T | None]:
    """Run a side effect, logging it as done, or as skipped with the setting that enables it.

    The delivery's lease is renewed first: a worker that lost its delivery to another
    worker raises LeaseLost here instead of acting twice. ``comment`` is the text a
    comment effect posts, kept with its log line whatever the outcome.
    """
    claims.check()
    try:
        result = call()
    except NotConfigured as missing:
        log.warning("%s on %s skipped: %s", action, ref.key, missing)
        log_effect(services.engine, ref, action, "skipped", str(missing), comment=comment)
        return False, None
    except Exception:
        # The delivery's outcome keeps the error; the side-effect log has no line for it.
        metrics.side_effect(ref.target, action, "failed")
        raise
    dry = services.out.dry_run
    log_effect(services.engine, ref, action, "dry_run" if dry else "done", comment=comment)
    return True, result


def _holder() -> tuple[str, timedelta | None]:
    claim = claims.current.get()
    if claim is not None:
        return claim.holder, claim.lease
    # Outside the worker (backfill, a script): this thread of this process.
    return f"process:{socket.gethostname()}:{os.getpid()}:{threading.get_ident()}", None


def publish(
    services: Services,
    ref: TicketRef,
    purpose: str,
    body: str,
    *,
    edit: bool = True,
    after: Callable[[Session, str], object] | None = None,
    bullet_ids: list[str] | None = None,
) -> str | None:
    """Post the bot's ``purpose`` comment on a ticket exactly once; returns its id.

    The slot is reserved first, so two deliveries never post at once (the later one is
    Deferred) and an attempt that died or timed out mid-post is followed by a look for
    the comment it may have left (adopted by its hidden marker) instead of a second one.
    With ``edit``, a posted comment whose text changed is edited in place; without, it is
    left as it is (a reply says what happened then). ``after`` runs in the transaction
    that records the comment (the lessons comment records its loads there).
    Returns None when nothing was sent.
    """
    text = CommentText(body, purpose, bullet_ids)
    missing = services.out.missing(ref)
    if missing is not None:
        # Without credentials nothing is posted: no need to reserve the slot at all. The
        # text is kept, so a maintainer can post it once the credentials are set.
        log.warning("%s comment on %s skipped: %s", purpose, ref.key, missing)
        log_effect(services.engine, ref, "comment", "skipped", missing, comment=text)
        return None
    holder, lease = _holder()
    ttl = lease or timedelta(seconds=services.settings.worker_lease_seconds)
    try:
        with db.transaction(services.engine) as session:
            slot = comments.reserve(session, ref.target, ref.key, purpose, holder, ttl)
    except comments.Busy as busy:
        raise Deferred(str(busy), busy.until) from None
    if slot.external_id and not slot.uncertain and (slot.body == body or not edit):
        with db.transaction(services.engine) as session:
            comments.release(session, slot.id, holder, unchanged=True)
        return None
    marker = comments.marker(purpose, ref.key)
    action = "edit_comment" if slot.external_id else "comment"
    try:
        done, external_id = effect(
            services,
            ref,
            action,
            lambda: services.out.upsert_comment(
                ref, body, slot.external_id, marker=marker, adopt=slot.uncertain
            ),
            comment=text,
        )
    except BaseException:
        # The outcome is unknown: the slot stays `posting`, so the next attempt looks first.
        with suppress(Exception), db.transaction(services.engine) as session:
            comments.release(session, slot.id, holder)
        raise
    if not done or external_id is None:
        with db.transaction(services.engine) as session:
            comments.release(session, slot.id, holder, unchanged=True)
        return None
    with db.transaction(services.engine) as session:
        comments.record(session, slot.id, holder, external_id, body, bullet_ids)
        if after is not None:
            after(session, external_id)
    return external_id

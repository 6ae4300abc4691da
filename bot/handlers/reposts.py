"""/ui's "Post now": the page queues a delivery's skipped comments, the worker posts them.

No web request waits on GitHub or Jira: `queue` stores one inbox row of the bot's own per
delivery, and the worker posts its comments here (bot/repost.py), with the retries, leases
and one-comment-per-slot guarantee of any delivery.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sqlalchemy.orm import Session

from bot import repost
from bot.handlers.context import Ignored, PermanentError
from bot.handlers.router import Event, Router
from playbook import db
from playbook.deliveries import inbox

if TYPE_CHECKING:
    from bot.services import Services

log = logging.getLogger(__name__)

router = Router()

# The inbox rows "Post now" queues: the bot's own source and event, one row per delivery.
SOURCE = "playbook"
EVENT = "repost"


def queue_id(delivery_row_id: int) -> str:
    """The delivery id of the queued repost of inbox row ``delivery_row_id``."""
    return f"repost:{delivery_row_id}"


@dataclass(frozen=True)
class Queued:
    """What `queue` did: the comments the worker will post, and whether they were queued
    already."""

    comments: list[str]  # "the lessons comment on owner/repo#1"
    already: bool

    def describe(self) -> str:
        """One line for a person."""
        what = ", ".join(self.comments)
        return f"{'already queued' if self.already else 'queued'}: the worker posts {what} shortly"


def queue(services: Services, delivery_key: str) -> Queued:
    """Queue the comments a delivery (row id or GUID) skipped, for the worker to post.

    Checked as `deliveries repost` checks (NothingToRepost, CredentialsMissing) without
    calling GitHub or Jira; asked twice before the worker runs, it is queued once.
    """
    with db.transaction(services.engine) as session:
        delivery, pending, refs = repost.left_to_post(services, session, delivery_key)
        new = inbox.enqueue(
            session,
            source=SOURCE,
            event=EVENT,
            delivery_id=queue_id(delivery.id),
            payload=json.dumps({"delivery": delivery.delivery_id}),
            # The worker runs it in the lane of the ticket it posts on.
            ticket_key=delivery.ticket_key or refs[0].key,
        )
    described = [
        f"{repost.comment_name(effect.purpose or '')} on {ref.key}"
        for effect, ref in zip(pending, refs, strict=True)
    ]
    return Queued(described, already=not new)


def queued_for(session: Session, delivery_row_ids: list[int]) -> set[int]:
    """Which of these inbox rows have their skipped comments queued for the worker."""
    ids = {queue_id(row_id): row_id for row_id in delivery_row_ids}
    return {ids[found] for found in inbox.waiting(session, SOURCE, ids)}


@router.register(SOURCE, EVENT)
def post_queued_comments(event: Event, services: Services) -> None:
    """Post the skipped comments of the delivery the payload names, once."""
    guid = event.payload.get("delivery")
    if not isinstance(guid, str) or not guid:
        raise PermanentError("the queued repost names no delivery")
    try:
        done = repost.repost(services, guid, queued=True)
    except repost.NothingToRepost as nothing:
        raise Ignored(str(nothing)) from None
    except repost.CredentialsMissing as missing:
        raise PermanentError(str(missing)) from None
    for result in done:
        log.info("%s", result.describe())

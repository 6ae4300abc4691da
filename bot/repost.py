"""Posting later the comments a delivery kept but could not post (its credentials were missing).

`deliveries repost` posts them at once; /ui's "Post now" queues them for the worker
(bot/handlers/reposts.py), which posts them here: no web request waits on GitHub or Jira.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

from github.GithubException import GithubException
from jira.exceptions import JIRAError
from sqlalchemy.orm import Session

from bot.effects import Effects, TicketRef
from bot.handlers.context import publish
from bot.logs import delivery_context
from bot.outcomes import NETWORK_ERRORS, Deferred, describe
from playbook import db
from playbook.deliveries import comments, inbox, side_effects
from playbook.errors import PlaybookError
from playbook.experiment import holdout
from playbook.lessons import ids
from playbook.models import Delivery, SideEffect
from playbook.search import retrieval

if TYPE_CHECKING:
    from bot.services import Services

log = logging.getLogger(__name__)


class CannotRepost(PlaybookError):
    """Nothing (more) was posted; the message says why in one sentence."""


class CredentialsMissing(CannotRepost):
    """The comment still cannot be posted: the message names the setting to set."""


class NothingToRepost(CannotRepost):
    """The delivery has no skipped comment left to post."""


@dataclass(frozen=True)
class Reposted:
    """One skipped comment handled by `repost`: posted now, or found posted already."""

    effect_id: int  # the skipped side effect it was kept in
    target: str
    ticket_key: str
    purpose: str
    comment_id: str | None
    already_posted: bool = False

    def describe(self) -> str:
        """One line for a person: what was posted where."""
        what = comment_name(self.purpose)
        where = f" (comment {self.comment_id})" if self.comment_id else ""
        if self.already_posted:
            return f"{what} on {self.ticket_key} was already posted{where}"
        return f"posted {what} on {self.ticket_key}{where}"


def comment_name(purpose: str) -> str:
    """How a person calls the comment of ``purpose``: the lessons comment, a reply."""
    if purpose == comments.LESSONS:
        return "the lessons comment"
    if purpose.startswith("reply:"):
        return f"the reply to comment {purpose.removeprefix('reply:')}"
    return f"the {purpose} comment"


def ref_of(effect: SideEffect, installation_id: int | None = None) -> TicketRef:
    """The ticket an effect was about; ``installation_id`` stands in when it kept none."""
    key = effect.ticket_key or ""
    if effect.target == "jira":
        return TicketRef.jira(key)
    repo, _, number = key.rpartition("#")
    issue = ids.number(number)
    if not repo or issue is None:
        raise CannotRepost(f"side effect {effect.id} names no GitHub issue ({key!r})")
    installation = effect.installation_id if effect.installation_id is not None else installation_id
    return TicketRef.github(repo, issue, installation)


def _is_kept_comment(effect: SideEffect) -> bool:
    return (
        effect.status == "skipped"
        and effect.action in side_effects.COMMENT_ACTIONS
        and effect.body is not None
        and bool(effect.purpose)
        and bool(effect.ticket_key)
    )


def can_post_now(
    services_or_effects: Services | Effects,
    effect: SideEffect,
    *,
    installation_id: int | None = None,
) -> str | None:
    """None when ``effect``'s kept comment can be posted now; else why not, naming the fix.

    Whether it was posted since is the log's to say (`side_effects.unposted`); this only
    asks whether the text is there and the credentials it needs are set now.
    """
    if not _is_kept_comment(effect):
        return "this is not a skipped comment whose text was kept"
    out = getattr(services_or_effects, "out", services_or_effects)
    try:
        ref = ref_of(effect, installation_id)
    except CannotRepost as error:
        return str(error)
    return out.missing(ref)


def left_to_post(
    services: Services, session: Session, delivery_key: str
) -> tuple[Delivery, list[SideEffect], list[TicketRef]]:
    """The delivery (row id or GUID), its comments left to post and their tickets, in the
    caller's transaction; raises NothingToRepost or CredentialsMissing."""
    delivery = inbox.get(session, delivery_key)
    guid, fallback = delivery.delivery_id, delivery.installation_id
    pending = side_effects.unposted(session, guid)
    if not pending:
        kept = [
            e for e in side_effects.for_deliveries(session, [guid])[guid] if _is_kept_comment(e)
        ]
        why = (
            "its skipped comments were posted, or replaced by newer ones, since"
            if kept
            else "it skipped no comment for missing credentials"
        )
        raise NothingToRepost(f"delivery {delivery_key} has nothing to post: {why}")
    refs = [ref_of(effect, fallback) for effect in pending]
    for effect, ref in zip(pending, refs, strict=True):
        missing = services.out.missing(ref)
        if missing is not None:
            raise CredentialsMissing(
                f"cannot post {comment_name(effect.purpose or '')} on {ref.key}: {missing}"
            )
    return delivery, pending, refs


def repost(services: Services, delivery_key: str, *, queued: bool = False) -> list[Reposted]:
    """Post the comments a delivery (row id or GUID) skipped, as they were written then.

    Each is posted through `publish`, in the delivery's log context, so its `done` effect
    joins the same delivery and its comment slot keeps it to one comment: reposting twice,
    or alongside a worker, posts once. Raises CredentialsMissing (before posting anything)
    while a setting is still missing, and NothingToRepost when nothing is left to post.
    With ``queued`` (the worker posting what `queue` queued) a failed post raises its own
    error, for the worker to retry, wait or give up as for any delivery.
    """
    with db.transaction(services.engine) as session:
        delivery, pending, refs = left_to_post(services, session, delivery_key)
        guid = delivery.delivery_id
    with delivery_context(guid):
        return [
            _post(services, effect, ref, queued=queued)
            for effect, ref in zip(pending, refs, strict=True)
        ]


def _post(services: Services, effect: SideEffect, ref: TicketRef, *, queued: bool) -> Reposted:
    """Post one kept comment; recording its lessons as loads once it is on the ticket."""
    purpose, body = effect.purpose or "", effect.body or ""
    bullet_ids = list(effect.bullet_ids) if effect.bullet_ids is not None else None
    shown = bullet_ids or []
    after = (
        (lambda session, _id: _record_shown(session, ref.key, shown))
        if purpose == comments.LESSONS
        else None
    )
    what = comment_name(purpose)

    def send() -> str | None:
        # Replies are never edited once posted, as their handler posts them; lessons are.
        return publish(
            services,
            ref,
            purpose,
            body,
            edit=purpose == comments.LESSONS,
            after=after,
            bullet_ids=bullet_ids,
        )

    if queued:
        return _posted(services, effect, ref, send())
    try:
        comment_id = send()
    except Deferred:
        raise CannotRepost(
            f"{what} on {ref.key} is being posted by another process; try again in a minute"
        ) from None
    except (GithubException, JIRAError, *NETWORK_ERRORS) as error:
        # publish left the slot marked as attempted: the next try looks for this comment first.
        raise CannotRepost(
            f"posting {what} on {ref.key} failed ({describe(error)}); try again"
        ) from None
    return _posted(services, effect, ref, comment_id)


def _record_shown(session: Session, ticket_key: str, shown: list[str]) -> None:
    """A kept lessons comment is on the ticket: its loads, and the experiment's exposures."""
    retrieval.record_shown_ids(session, ticket_key, shown)
    ranked = [(bullet_id, rank) for rank, bullet_id in enumerate(shown, start=1)]
    holdout.record_if_shown(session, ticket_key, ranked, None, "playbook-bot")


def _posted(
    services: Services, effect: SideEffect, ref: TicketRef, comment_id: str | None
) -> Reposted:
    """What became of one kept comment once `publish` returned ``comment_id``."""
    purpose, body = effect.purpose or "", effect.body or ""
    what = comment_name(purpose)
    result = Reposted(effect.id, ref.target, ref.key, purpose, comment_id)
    if comment_id is not None:
        log.info("reposted %s on %s (comment %s)", what, ref.key, comment_id)
        return result
    # Nothing was sent: the comment on record says this text already (a repost that ran
    # first), or the credentials went missing between the check and the post.
    with db.transaction(services.engine) as session:
        slot = comments.find(session, ref.target, ref.key, purpose)
        # A reply is never edited: whatever answer is posted stands for this one.
        on_record = (
            slot is not None
            and slot.state == "posted"
            and (slot.body == body or purpose != comments.LESSONS)
        )
        external_id = slot.external_id if slot is not None else None
    if not on_record:
        raise CannotRepost(f"{what} on {ref.key} was not posted; see the worker's log")
    return Reposted(effect.id, ref.target, ref.key, purpose, external_id, already_posted=True)

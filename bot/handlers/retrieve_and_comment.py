"""New or changed tickets: retrieve the lessons that fit and keep one bot comment up to date."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from sqlalchemy import select

from bot import render
from bot.effects import TicketRef
from bot.handlers.context import effect, github_issue, jira_ticket
from bot.handlers.router import Event, router
from playbook import clock, db, retrieval
from playbook.models import BotComment
from playbook.text import Ticket

if TYPE_CHECKING:
    from bot.worker import Services

log = logging.getLogger(__name__)

# The fields whose change can change which lessons fit (Jira changelog field names).
RETRIEVAL_FIELDS = {"summary", "description", "labels", "component", "components"}


def refresh(services: Services, ticket: Ticket, ref: TicketRef, markup: str) -> None:
    """Retrieve lessons for a ticket and post, or edit, the bot's one comment on it."""
    settings = services.settings
    with db.transaction(services.engine) as session:
        existing = session.scalars(
            select(BotComment).where(
                BotComment.target == ref.target, BotComment.ticket_key == ref.key
            )
        ).first()
        result = services.retriever.search(session, ticket, k=settings.lessons_per_ticket)
    if not result.hits and existing is None:
        with db.transaction(services.engine) as session:
            retrieval.record_shown(session, ref.key, [], result.query_id)
        log.info("no lessons fit %s; no comment", ref.key)
        return
    if result.hits:
        body, shown = render.lessons_comment(
            result.hits, markup=markup, max_chars=settings.comment_max_chars
        )
    else:
        body, shown = render.no_lessons_comment(markup), []
    if existing is not None and existing.body == body:
        log.info("lessons for %s unchanged; comment left as it is", ref.key)
        return
    action = "edit_comment" if existing is not None else "comment"
    done, external_id = effect(
        services,
        ref,
        action,
        lambda: services.out.upsert_comment(ref, body, existing.external_id if existing else None),
    )
    if not done:
        return
    shown_hits = [hit for hit in result.hits if hit.bullet_id in shown]
    with db.transaction(services.engine) as session:
        row = session.scalars(
            select(BotComment).where(
                BotComment.target == ref.target, BotComment.ticket_key == ref.key
            )
        ).first()
        now = clock.now()
        if row is None:
            row = BotComment(target=ref.target, ticket_key=ref.key, created_at=now)
            session.add(row)
        row.external_id = external_id
        row.bullet_ids = shown
        row.body = body
        row.updated_at = now
        retrieval.record_shown(session, ref.key, shown_hits, result.query_id)
    log.info("%s lessons %s on %s", action, ", ".join(shown) or "(none)", ref.key)


@router.register("jira", "jira:issue_created")
def jira_issue_created(event: Event, services: Services) -> None:
    """A new Jira issue gets the lessons that fit it."""
    ticket, ref = jira_ticket(event)
    refresh(services, ticket, ref, "jira")


@router.register("jira", "jira:issue_updated")
def jira_issue_updated(event: Event, services: Services) -> None:
    """An edit of summary, description or labels re-retrieves and edits the comment."""
    items = (event.payload.get("changelog") or {}).get("items") or []
    changed = {str(item.get("field", "")).lower() for item in items if isinstance(item, dict)}
    if not changed & RETRIEVAL_FIELDS:
        log.info("update changed %s; lessons unaffected", ", ".join(sorted(changed)) or "nothing")
        return
    ticket, ref = jira_ticket(event)
    refresh(services, ticket, ref, "jira")


@router.register("github", "issues", "opened")
@router.register("github", "issues", "edited")
@router.register("github", "issues", "labeled")
@router.register("github", "issues", "unlabeled")
def github_issue_changed(event: Event, services: Services) -> None:
    """A new or changed GitHub issue gets the lessons that fit it.

    Every edit re-retrieves: the comment is only edited when the lessons change.
    """
    ticket, ref = github_issue(event)
    refresh(services, ticket, ref, "markdown")

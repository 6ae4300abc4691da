"""New or changed tickets: retrieve the lessons that fit and keep one bot comment up to date."""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from datetime import datetime
from typing import TYPE_CHECKING

from sqlalchemy.orm import Session

from bot import payloads, render, repo_settings
from bot.effects import CommentText, TicketRef, record_effect
from bot.handlers.context import Ignored, publish
from bot.handlers.router import Event, Router
from playbook import clock, db
from playbook.deliveries import comments, inbox
from playbook.experiment import holdout
from playbook.models import BotComment
from playbook.outcomes import seen_tickets
from playbook.repos.settings import FILE_PATH
from playbook.search import retrieval
from playbook.search.text import Ticket

if TYPE_CHECKING:
    from bot.config import Settings
    from bot.services import Services

log = logging.getLogger(__name__)
router = Router()

# The fields whose change can change which lessons fit (Jira changelog field names).
RETRIEVAL_FIELDS = {"summary", "description", "labels", "component", "components"}


@dataclass(frozen=True)
class Options:
    """What a repository's settings file changes for its tickets (None: the installation's)."""

    max_lessons: int | None = None
    holdout_percent: int | None = None
    comment: bool = True


def refresh(
    services: Services,
    ticket: Ticket,
    ref: TicketRef,
    markup: str,
    created_at: datetime | None = None,
    options: Options | None = None,
) -> None:
    """Retrieve lessons for a ticket and post, or edit, the bot's one comment on it.

    A ticket in the holdout's held-out arm gets no comment: the lessons it would have been
    shown are kept as would-have-shown exposures, re-ranked by every edit as a comment is.
    """
    settings = services.settings
    options = options or Options()
    missing = services.out.missing(ref)
    # One transaction when nothing is posted (no lesson fits, or no credentials): the worker
    # then commits twice per such delivery, here and its outcome.
    with db.transaction(services.engine) as session:
        now = clock.now()
        # Before the ticket is marked seen: one seen before the experiment began stays out.
        placed = holdout.enroll(
            session,
            settings.experiment,
            ref.key,
            now=now,
            created_at=created_at,
            percent=options.holdout_percent,
        )
        # A verified delivery is about this ticket: agents' reports about it weigh.
        seen_tickets.saw(session, ref.key, ref.target)
        if not options.comment:
            # The repository asked for no comment: the ticket is known, nothing is shown.
            inbox.asynchronous_commit(session)
            log.info("%s: no lessons comment (comment: false in %s)", ref.key, FILE_PATH)
            return
        existing = comments.find(session, ref.target, ref.key, comments.LESSONS)
        # The process-wide index, shared with the near-duplicate check of lessons added here.
        result = retrieval.Retriever.shared(session).search(
            session, ticket, k=options.max_lessons or settings.lessons_per_ticket
        )
        held_out = placed is not None and placed.arm == "held_out"
        if held_out:
            # Logs only, as when no lesson fits: a lost one goes with the delivery's outcome.
            inbox.asynchronous_commit(session)
            # Shown nothing by design; the text is kept so that a held-out ticket no lesson
            # would have fitted still counts toward the playbook's gaps.
            retrieval.record_held_out(session, ref.key, ticket, result.query_id)
            held = holdout.record_exposures(
                session,
                ref.key,
                "held_out",
                [(hit.bullet_id, hit.rank) for hit in result.hits],
                query_id=result.query_id,
                consumer="playbook-bot",
                now=now,
            )
        else:
            fit, body, shown = _prepare(
                session, ref, ticket, result, existing, markup, missing, settings
            )
    if held_out:
        log.info(
            "%s is held out (holdout experiment): no comment; %d lessons would have been shown",
            ref.key,
            held,
        )
        return
    if not fit:
        log.info("no lessons fit %s; no comment", ref.key)
        return
    if missing is not None:
        log.warning("%s comment on %s skipped: %s", comments.LESSONS, ref.key, missing)
        return
    shown_hits = [hit for hit in result.hits if hit.bullet_id in shown]
    posted = publish(
        services,
        ref,
        comments.LESSONS,
        body,
        bullet_ids=shown,
        after=lambda session, _id: _record_shown(session, ref, ticket, shown_hits, result.query_id),
    )
    if posted is None:
        log.info("lessons for %s unchanged; comment left as it is", ref.key)
    else:
        log.info("lessons %s on %s (comment %s)", ", ".join(shown) or "(none)", ref.key, posted)


def _record_shown(
    session: Session, ref: TicketRef, ticket: Ticket, hits: list[retrieval.Hit], query_id: str
) -> None:
    """The comment's lessons are on the ticket: loads, and the experiment's shown exposures."""
    retrieval.record_shown(session, ref.key, hits, query_id, ticket=ticket)
    holdout.record_if_shown(
        session, ref.key, [(hit.bullet_id, hit.rank) for hit in hits], query_id, "playbook-bot"
    )


def _prepare(
    session: Session,
    ref: TicketRef,
    ticket: Ticket,
    result: retrieval.SearchResult,
    existing: BotComment | None,
    markup: str,
    missing: str | None,
    settings: Settings,
) -> tuple[bool, str, list[str]]:
    """Whether the ticket gets (or keeps) a comment, its text and the lessons it shows."""
    ever_posted = existing is not None and bool(existing.external_id or existing.state == "posting")
    fit = bool(result.hits) or ever_posted
    if not fit or missing is not None:
        # Logs only: should the database forget them in a crash, the delivery's outcome
        # goes with them and it runs again.
        inbox.asynchronous_commit(session)
    if not fit:
        retrieval.record_shown(session, ref.key, [], result.query_id, ticket=ticket)
        return False, "", []
    # Rendered without credentials too: the skipped effect keeps the text, so the
    # comment can be read and posted later exactly as it would have been.
    body, shown = _comment(result.hits, markup, settings.comment_max_chars)
    if missing is not None:
        text = CommentText(body, comments.LESSONS, shown)
        record_effect(session, ref, "comment", "skipped", missing, comment=text)
    return True, body, shown


def _comment(hits: list[retrieval.Hit], markup: str, max_chars: int) -> tuple[str, list[str]]:
    """The lessons comment's text and the ids it shows (none once no lesson fits any more)."""
    if hits:
        return render.lessons_comment(hits, markup=markup, max_chars=max_chars)
    return render.no_lessons_comment(markup), []


@router.register("jira", "jira:issue_created")
def jira_issue_created(event: Event, services: Services) -> None:
    """A new Jira issue gets the lessons that fit it."""
    data = payloads.JiraIssueEvent.model_validate(event.payload)
    refresh(
        services,
        data.issue.ticket(),
        TicketRef.jira(data.issue.key),
        "jira",
        data.issue.fields.created,
    )


@router.register("jira", "jira:issue_updated")
def jira_issue_updated(event: Event, services: Services) -> None:
    """An edit of summary, description or labels re-retrieves and edits the comment."""
    data = payloads.JiraIssueEvent.model_validate(event.payload)
    items = data.changelog.items if data.changelog else []
    changed = {item.field.lower() for item in items}
    if not changed & RETRIEVAL_FIELDS:
        raise Ignored(
            f"the update changed {', '.join(sorted(changed)) or 'nothing'}; lessons unaffected"
        )
    refresh(
        services,
        data.issue.ticket(),
        TicketRef.jira(data.issue.key),
        "jira",
        data.issue.fields.created,
    )


@router.register("github", "issues", "opened")
@router.register("github", "issues", "edited")
@router.register("github", "issues", "labeled")
@router.register("github", "issues", "unlabeled")
def github_issue_changed(event: Event, services: Services) -> None:
    """A new or changed GitHub issue gets the lessons that fit it.

    Every edit re-retrieves: the comment is only edited when the lessons change.
    """
    data = payloads.IssuesEvent.model_validate(event.payload)
    repo = data.repository.full_name
    ref = TicketRef.github(repo, data.issue.number, event.installation_id)
    found = repo_settings.effective(services, repo, event.installation_id)
    chosen = found.settings
    if not chosen.enabled:
        raise Ignored(f"{repo} turned the bot off (enabled: false in {FILE_PATH})")
    ticket = replace(data.issue.ticket(repo), scope=found.scope)
    label = chosen.ignores(ticket.labels)
    if label is not None:
        raise Ignored(f"the issue is labelled {label!r}, which ignore_labels in {FILE_PATH} names")
    options = Options(chosen.max_lessons, chosen.holdout_percent, chosen.comment)
    refresh(services, ticket, ref, "markdown", data.issue.created_at, options)

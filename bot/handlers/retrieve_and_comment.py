"""New or changed tickets: retrieve the lessons that fit and keep one bot comment up to date."""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from datetime import datetime
from typing import TYPE_CHECKING

from sqlalchemy.orm import Session

from bot import metrics, payloads, render, repo_settings
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
from playbook.search.floor import Floor
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
    min_relevance: float | None = None


def refresh(
    services: Services,
    ticket: Ticket,
    ref: TicketRef,
    markup: str,
    created_at: datetime | None = None,
    options: Options | None = None,
) -> None:
    """Retrieve lessons for a ticket and post, or edit, the bot's one comment on it.

    The bot speaks only when a lesson fits: the best lesson's relevance estimate must reach
    the floor (`floor.Floor`), and the comment shows only those reaching the lessons' floor.
    When none does, nothing is posted; a comment posted before is edited to say that none
    fits any more, never left stale. A ticket in the holdout's held-out arm gets no comment:
    the lessons it would have been shown (under the same floor) are kept as would-have-shown
    exposures, re-ranked by every edit as a comment is.
    """
    settings = services.settings
    options = options or Options()
    bar = Floor.of(
        options.min_relevance if options.min_relevance is not None else settings.min_relevance
    )
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
        # What a comment would show: the experiment compares like with like.
        fitting = bar.shown(result.hits)
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
                [(hit.bullet_id, hit.rank) for hit in fitting],
                query_id=result.query_id,
                consumer="playbook-bot",
                now=now,
            )
        else:
            fit, body, shown = _prepare(
                session, ref, ticket, result, fitting, existing, markup, missing, settings
            )
    if held_out:
        log.info(
            "%s is held out (holdout experiment): no comment; %d lessons would have been shown",
            ref.key,
            held,
        )
        return
    if not fit:
        metrics.lessons_comment(ref.target, "abstained")
        log.info("no lesson reaches the relevance floor for %s; no comment", ref.key)
        return
    if missing is not None:
        log.warning("%s comment on %s skipped: %s", comments.LESSONS, ref.key, missing)
        return
    shown_hits = [hit for hit in fitting if hit.bullet_id in shown]
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
        metrics.lessons_comment(ref.target, "posted" if shown else "abstained")
        log.info("lessons %s on %s (comment %s)", ", ".join(shown) or "(none)", ref.key, posted)


def _record_shown(
    session: Session, ref: TicketRef, ticket: Ticket, hits: list[retrieval.Hit], query_id: str
) -> None:
    """The comment's lessons are on the ticket: loads, the experiment's shown exposures, and
    each lesson's estimate on the comment (a reaction to it is judged against them)."""
    retrieval.record_shown(session, ref.key, hits, query_id, ticket=ticket, spoke=bool(hits))
    holdout.record_if_shown(
        session, ref.key, [(hit.bullet_id, hit.rank) for hit in hits], query_id, "playbook-bot"
    )
    row = comments.find(session, ref.target, ref.key, comments.LESSONS)
    if row is not None:
        row.relevances = [hit.relevance for hit in hits]


def _prepare(
    session: Session,
    ref: TicketRef,
    ticket: Ticket,
    result: retrieval.SearchResult,
    fitting: list[retrieval.Hit],
    existing: BotComment | None,
    markup: str,
    missing: str | None,
    settings: Settings,
) -> tuple[bool, str, list[str]]:
    """Whether the ticket gets (or keeps) a comment, its text and the lessons it shows.

    A ticket no lesson fits gets nothing, unless the bot already spoke there (its comment is
    then edited to say none fits) or `PLAYBOOK_SAY_NOTHING_FITS` asks for a one-line note.
    """
    ever_posted = existing is not None and bool(existing.external_id or existing.state == "posting")
    fit = bool(fitting) or ever_posted or settings.say_nothing_fits
    if not fit or missing is not None:
        # Logs only: should the database forget them in a crash, the delivery's outcome
        # goes with them and it runs again.
        inbox.asynchronous_commit(session)
    if not fit:
        retrieval.record_shown(session, ref.key, [], result.query_id, ticket=ticket, spoke=False)
        return False, "", []
    # Rendered without credentials too: the skipped effect keeps the text, so the
    # comment can be read and posted later exactly as it would have been.
    body, shown = _comment(fitting, markup, settings.comment_max_chars, first=not ever_posted)
    if missing is not None:
        text = CommentText(body, comments.LESSONS, shown)
        record_effect(session, ref, "comment", "skipped", missing, comment=text)
    return True, body, shown


def _comment(
    hits: list[retrieval.Hit], markup: str, max_chars: int, *, first: bool
) -> tuple[str, list[str]]:
    """The lessons comment's text and the ids it shows (none when no lesson fits)."""
    if hits:
        return render.lessons_comment(hits, markup=markup, max_chars=max_chars)
    return render.no_lessons_comment(markup, first=first), []


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
    options = Options(
        chosen.max_lessons, chosen.holdout_percent, chosen.comment, chosen.min_relevance
    )
    refresh(services, ticket, ref, "markdown", data.issue.created_at, options)

"""Lessons where the agent edits: one comment on a PR listing the lessons anchored to its files.

The rule: a lesson is listed when one of its globs (`playbook.anchors.pr_files`) matches a
file the PR changes (or a renamed file's old path), at most ``max_lessons`` (the repository's,
else PLAYBOOK_LESSONS_PER_TICKET), ranked by its relevance estimate for the PR's title and body
(those the search did not rank come after, by how many files they match, then by id). The
relevance floor does not hide an anchored lesson: the anchor is the evidence the floor stands
in for when a ticket's words are all there is, and a PR's title ("Bump deps") says little of
the files it touches. The comment is kept in place across pushes and says so when no lesson
applies any more. The shown lessons are loads of the PR's tickets, once per ticket and lesson
(the same count as the lessons comment's, so one shown on both counts once).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from sqlalchemy import select
from sqlalchemy.orm import Session

from bot import agents_md, payloads, render_anchors, repo_settings
from bot.effects import TicketRef
from bot.handlers.context import Ignored, effect, publish
from bot.handlers.router import Event, Router
from bot.render_anchors import AnchoredLesson
from playbook import db
from playbook.anchors import pr_files
from playbook.deliveries import comments
from playbook.models import Bullet
from playbook.outcomes import tracking, usage
from playbook.repos.settings import FILE_PATH
from playbook.search import retrieval
from playbook.search.text import Ticket

if TYPE_CHECKING:
    from bot.services import Services

log = logging.getLogger(__name__)
router = Router()

ANCHORS = "anchors"
CONSUMER = "playbook-bot"


@router.register("github", "pull_request", "opened")
@router.register("github", "pull_request", "synchronize")
@router.register("github", "pull_request", "ready_for_review")
def pull_request_anchors(event: Event, services: Services) -> None:
    """Read the PR's changed files and keep its one comment of anchored lessons up to date."""
    data = payloads.PullRequestEvent.model_validate(event.payload)
    pr, repo = data.pull_request, data.repository.full_name
    if pr.state != "open":
        raise Ignored("the pull request is closed: no lessons for its files")
    author = pr.user
    if agents_md.is_sync_pull(
        services,
        event.installation_id,
        pr.head.ref if pr.head else "",
        author.login if author else None,
        author.type if author else None,
    ):
        raise Ignored("the bot's AGENTS.md sync PR gets no lessons for its files")
    found = repo_settings.effective(services, repo, event.installation_id)
    if not found.settings.enabled:
        raise Ignored(f"{repo} turned the bot off (enabled: false in {FILE_PATH})")
    if not found.settings.pr_comment:
        raise Ignored(f"{repo} asked for no PR comment (pr_comment: false in {FILE_PATH})")
    ref = TicketRef.github(repo, pr.number, event.installation_id)
    done, changed = effect(services, ref, "read_pull_files", lambda: services.out.pull_files(ref))
    if not done:
        return  # no credentials: logged as skipped, with the setting to set
    ticket = Ticket(key=ref.key, summary=pr.title, description=pr.body or None, scope=found.scope)
    limit = found.settings.max_lessons or services.settings.lessons_per_ticket
    with db.transaction(services.engine) as session:
        chosen = choose(session, ticket, changed or [], limit)
        slot = comments.find(session, ref.target, ref.key, ANCHORS)
        ever_posted = slot is not None and bool(slot.external_id or slot.state == "posting")
    if not chosen and not ever_posted:
        log.info("%s: no lesson anchored to its %d changed files", ref.key, len(changed or []))
        return
    body, shown = render_anchors.anchors_comment(
        chosen, max_chars=services.settings.comment_max_chars
    )
    posted = publish(services, ref, ANCHORS, body, bullet_ids=shown)
    if shown:
        with db.transaction(services.engine) as session:
            record_loads(session, ref.key, shown, body)
    log.info(
        "%s: anchored lessons %s (comment %s)",
        ref.key,
        ", ".join(shown) or "(none any more)",
        posted or "unchanged",
    )


def choose(
    session: Session, ticket: Ticket, changed: list[pr_files.ChangedFile], limit: int
) -> list[AnchoredLesson]:
    """The active lessons of the ticket's scope (and global) anchored to ``changed``, ranked."""
    if not changed:
        return []
    scopes = ["global", *([ticket.scope] if ticket.scope else [])]
    rows = session.execute(
        select(Bullet.id, Bullet.text, Bullet.paths, Bullet.stale_since).where(
            Bullet.status == "active", Bullet.scope.in_(scopes), Bullet.paths.is_not(None)
        )
    ).all()
    texts = {row.id: (row.text, row.stale_since is not None) for row in rows}
    matched = pr_files.anchored(((row.id, row.paths) for row in rows), changed)
    if not matched:
        return []
    # The estimates of the search the lessons comment would make for the PR's text.
    result = retrieval.Retriever.shared(session).search(session, ticket, k=retrieval.POOL)
    hits = {hit.bullet_id: hit for hit in result.hits}

    def order(found: pr_files.Anchored) -> tuple[float, int, str]:
        hit = hits.get(found.bullet_id)
        level = hit.relevance if hit is not None and hit.relevance is not None else -1.0
        return (-level, -len(found.files), found.bullet_id)

    return [
        AnchoredLesson(
            found.bullet_id,
            texts[found.bullet_id][0],
            found.files,
            hits.get(found.bullet_id),
            texts[found.bullet_id][1],
        )
        for found in sorted(matched, key=order)[:limit]
    ]


def record_loads(session: Session, pr_key: str, shown: list[str], body: str) -> int:
    """The shown lessons as loads of the PR's tickets (the PR itself when it links none).

    Only once the comment holds this text; each (ticket, lesson) once, whatever the pushes.
    """
    slot = comments.find(session, "github", pr_key, ANCHORS)
    if slot is None or not slot.external_id or slot.body != body:
        return 0
    known = set(session.scalars(select(Bullet.id).where(Bullet.id.in_(shown))))
    ids = [bullet_id for bullet_id in shown if bullet_id in known]
    if not ids:
        return 0
    recorded = 0
    for ticket in tracking.tickets_of(session, pr_key) or [pr_key]:
        recorded += len(
            usage.record(
                session,
                "loaded",
                ids,
                ticket_key=ticket,
                ranks=list(range(1, len(ids) + 1)),
                consumer=CONSUMER,
                pr_key=pr_key,
                dedup_keys=[usage.once_key("loaded", ticket, bullet_id) for bullet_id in ids],
            )
        )
    return recorded

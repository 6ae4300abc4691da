"""Lessons where the agent edits: one comment on a PR listing the lessons anchored to its files.

Which lessons, and in what order, is `playbook.anchors.pr_lessons`'s rule: those anchored to a
changed file, at most ``max_lessons`` (the repository's, else PLAYBOOK_LESSONS_PER_TICKET),
ranked by relevance to the PR's title and body. The comment is kept in place across pushes and
says so when no lesson applies any more; the lessons it shows are loads of the PR's tickets.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from bot import agents_md, payloads, render_anchors, repo_settings
from bot.effects import TicketRef
from bot.handlers.context import Ignored, effect, publish
from bot.handlers.router import Event, Router
from playbook import db
from playbook.anchors import pr_lessons
from playbook.anchors.pr_files import ChangedFile
from playbook.deliveries import comments
from playbook.repos.settings import FILE_PATH
from playbook.search.floor import Floor
from playbook.search.text import Ticket

if TYPE_CHECKING:
    from bot.services import Services

log = logging.getLogger(__name__)
router = Router()

ANCHORS = "anchors"


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
    with db.transaction(services.engine) as session:
        slot = comments.find(session, ref.target, ref.key, ANCHORS)
        ever_posted = slot is not None and bool(slot.external_id or slot.state == "posting")
        if not ever_posted and not pr_lessons.any_anchored(session, found.scope):
            # No lesson of the scope is anchored anywhere: no file of the PR is worth a call.
            log.info("%s: no lesson of %s is anchored to files", ref.key, found.scope)
            return
    done, changed = effect(services, ref, "read_pull_files", lambda: services.out.pull_files(ref))
    if not done:
        return  # no credentials: logged as skipped, with the setting to set
    ticket = Ticket(key=ref.key, summary=pr.title, description=pr.body or None, scope=found.scope)
    limit = found.settings.max_lessons or services.settings.lessons_per_ticket
    minimum = found.settings.min_relevance
    floor = Floor.of(services.settings.min_relevance if minimum is None else minimum)
    # One read of the PR's files serves staleness and this comment: path and a rename's old path.
    files = [ChangedFile(f.path, f.previous) for f in changed or []]
    with db.transaction(services.engine) as session:
        chosen = pr_lessons.choose(session, ticket, files, limit, floor)
    if not chosen and not ever_posted:
        log.info("%s: no lesson anchored to its %d changed files", ref.key, len(changed or []))
        return
    body, shown = render_anchors.anchors_comment(
        chosen, max_chars=services.settings.comment_max_chars
    )
    posted = publish(services, ref, ANCHORS, body, bullet_ids=shown)
    if shown:
        with db.transaction(services.engine) as session:
            # Once the PR holds this text (just posted, or unchanged since): a retry after a
            # failed post records nothing it did not show.
            slot = comments.find(session, ref.target, ref.key, ANCHORS)
            if slot is not None and slot.external_id and slot.body == body:
                pr_lessons.record_loads(session, ref.key, shown)
    log.info(
        "%s: anchored lessons %s (comment %s)",
        ref.key,
        ", ".join(shown) or "(none any more)",
        posted or "unchanged",
    )

"""Pull requests: a delivery's facts to ``pull_news``, and the cites in a PR's commits."""

from __future__ import annotations

from typing import TYPE_CHECKING

from bot import agents_md, payloads, reactions, stale_flags
from bot.effects import TicketRef
from bot.handlers.context import Ignored, effect
from bot.handlers.pull_news import apply_pull_request
from bot.handlers.router import Event, Router
from playbook import clock, db
from playbook.outcomes import tracking
from playbook.outcomes.evidence import cite_later
from playbook.outcomes.pull_outcome import Closer
from playbook.outcomes.tracking import PullRequestState

if TYPE_CHECKING:
    from bot.services import Services

router = Router()


def pr_state(data: payloads.PullRequestEvent, installation_id: int | None) -> PullRequestState:
    """What a pull_request payload says about the PR."""
    pr = data.pull_request
    repo = data.repository.full_name
    state = "merged" if pr.merged else pr.state
    return PullRequestState(
        key=f"{repo}#{pr.number}",
        repo=repo,
        number=pr.number,
        title=pr.title,
        head_ref=pr.head.ref if pr.head else "",
        url=pr.html_url,
        state=state,
        updated_at=clock.to_utc(pr.updated_at) if pr.updated_at else None,
        closed_at=clock.to_utc(pr.closed_at) if pr.closed_at else None,
        merged_at=clock.to_utc(pr.merged_at) if pr.merged_at else None,
        installation_id=installation_id,
        head_sha=pr.head.sha.lower() if pr.head and pr.head.sha else None,
        merge_commit_sha=pr.merge_commit_sha.lower() if pr.merge_commit_sha else None,
    )


@router.register("github", "pull_request", "opened")
@router.register("github", "pull_request", "edited")
@router.register("github", "pull_request", "synchronize")
@router.register("github", "pull_request", "reopened")
@router.register("github", "pull_request", "closed")
def pull_request_changed(event: Event, services: Services) -> None:
    """Record links, lessons and cites of a PR; when it closes, apply its outcome."""
    data = payloads.PullRequestEvent.model_validate(event.payload)
    seen = pr_state(data, event.installation_id)
    pr = data.pull_request
    author = pr.user
    if agents_md.is_sync_pull(
        services,
        event.installation_id,
        seen.head_ref,
        author.login if author else None,
        author.type if author else None,
    ):
        # The bot's own AGENTS.md PR is no agent's work: its ids are no cites, nor its outcome.
        raise Ignored("the bot's AGENTS.md sync PR is not agent work")
    # Who closed it, or who merged it (a revert's merge needs write access, as a closing).
    by = pr.merged_by if seen.state == "merged" and pr.merged_by else data.sender
    closer = Closer(
        login=by.login if by else None,
        is_bot=bool(by and by.type == "Bot"),
        opener=pr.user.login if pr.user else None,
    )
    try:
        apply_pull_request(
            services,
            seen,
            pr.body,
            [label.name for label in pr.labels],
            closer,
            author=author.login if author else None,
        )
    finally:
        if event.action == "closed":
            # Whatever the closing counts for (an Ignored one too), its tickets are done.
            read_reactions(services, seen)
            if seen.state == "merged":
                # The merged code is the repository's now, whatever the outcome: lessons
                # anchored to files it changed are flagged for a maintainer.
                stale_flags.flag_merged(services, seen)
    if event.action == "synchronize":
        cite_commits(services, seen)


def read_reactions(services: Services, seen: PullRequestState) -> None:
    """Read the 👍/👎 on the lessons comments of the closed PR's tickets (and its own).

    Every closing reads again; a comment nobody reacted to since answers 304 at no cost.
    """
    with db.transaction(services.engine) as session:
        tickets = tracking.tickets_of(session, seen.key)
    reactions.read_closed(services, [seen.key, *tickets], seen.installation_id)


def cite_commits(services: Services, seen: PullRequestState) -> None:
    """Bullet ids in the PR's commit messages are cites too (they need the GitHub API)."""
    ref = TicketRef.github(seen.repo, seen.number, seen.installation_id)

    done, found = effect(services, ref, "read_commits", lambda: services.out.commit_messages(ref))
    if not done or not found:
        return
    with db.transaction(services.engine) as session:
        credit = services.settings.superseded_cites_count_for_replacement
        cite_later(session, seen.key, "\n".join(found), "commit", credit_replacement=credit)

"""Pull requests: link tickets, capture lessons, record cites, and apply the outcome."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from bot import payloads
from bot.effects import TicketRef
from bot.handlers.context import Ignored, effect
from bot.handlers.router import Event, Router
from playbook import clock, db
from playbook.outcomes import tracking
from playbook.outcomes.evidence import ACTOR, capture, cite, scope_of
from playbook.outcomes.links import pull_request_links
from playbook.outcomes.tracking import PullRequestState

if TYPE_CHECKING:
    from bot.services import Services

log = logging.getLogger(__name__)
router = Router()
__all__ = ["ACTOR", "Closer", "apply_pull_request", "capture", "cite", "scope_of"]


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
    )


@dataclass(frozen=True)
class Closer:
    """Who closed a PR, and who opened it: a closed PR's outcome depends on the closer."""

    login: str | None
    is_bot: bool = False
    opener: str | None = None


def flagged(
    services: Services, labels: list[str], tickets: list[str], installation_id: int | None
) -> bool:
    """Whether the PR or one of its tickets carries the human-review flag."""
    label = services.settings.review_label.lower()
    if any(name.lower() == label for name in labels):
        return True
    for ticket in tickets:
        if "#" in ticket:
            ticket_repo, number = ticket.rsplit("#", 1)
            ref = TicketRef.github(ticket_repo, int(number), installation_id)
        else:
            ref = TicketRef.jira(ticket)
        done, is_flagged = effect(
            services, ref, "check_review_flag", lambda r=ref: services.out.flagged_for_review(r)
        )
        if done and is_flagged:
            return True
    return False


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
    closer = Closer(
        login=data.sender.login if data.sender else None,
        is_bot=bool(data.sender and data.sender.type == "Bot"),
        opener=pr.user.login if pr.user else None,
    )
    apply_pull_request(services, seen, pr.body, [label.name for label in pr.labels], closer)
    if event.action == "synchronize":
        with db.transaction(services.engine) as session:
            tickets = tracking.tickets_of(session, seen.key)
        cite_commits(services, seen, tickets[0] if tickets else None)


def closer_may_reject(services: Services, seen: PullRequestState, closer: Closer) -> str | None:
    """Why the person who closed a PR unmerged may not demote lessons, or None if they may.

    Anyone who can open a PR (read access, a fork) can close their own PR: that says
    nothing about the lessons. Closing counts when the closer has write access to the
    repository, or is the agent that opened the PR (an App's bot, or a login listed in
    PLAYBOOK_AGENT_LOGINS).
    """
    if not closer.login:
        return "who closed it is unknown"
    own = closer.login == closer.opener
    if own and (closer.is_bot or closer.login.lower() in services.settings.agents):
        return None
    ref = TicketRef.github(seen.repo, seen.number, seen.installation_id)
    login = closer.login
    checked, allowed = effect(
        services, ref, "check_permission", lambda: services.out.can_change_playbook(ref, login)
    )
    if not checked:
        return f"GitHub is not configured, so {login}'s access to {seen.repo} cannot be checked"
    if not allowed:
        return f"{login} has no write access to {seen.repo}"
    return None


def evidence_of(seen: PullRequestState) -> str:
    """The outcome a payload shows, as a key: the same closing seen again is the same key."""
    at = seen.merged_at or seen.closed_at or seen.updated_at
    return f"{seen.state}@{at.isoformat() if at else '?'}"


def apply_pull_request(
    services: Services,
    seen: PullRequestState,
    body: str | None,
    labels: list[str],
    closer: Closer | None = None,
    *,
    written_at: datetime | None = None,
    comments: Sequence[tuple[str | None, datetime | None]] = (),
) -> None:
    """What any news about a PR means: links, captured lessons, cites, and its outcome.

    Shared by the webhook handler and `backfill`, which walks closed PRs through the API
    and passes when the body was written (``written_at``) and the PR's comments with their
    times, so each cite is recorded when it was made, before the outcome settles it.
    An outcome is applied once per closing (``evidence_of``): an edit of a closed PR, a
    duplicate delivery or a backfill re-run finds it applied already and changes nothing.
    """
    links = pull_request_links(seen.title, seen.head_ref, body, seen.repo)
    kinds = [(key, "jira") for key in links.jira_keys] + [(key, "closes") for key in links.closes]
    with db.transaction(services.engine) as session:
        pull, news = tracking.observe(session, seen)
        tickets = tracking.link(session, seen.key, kinds)
        primary = next((t for t in links.tickets if t in tickets), tickets[0] if tickets else None)
        added = capture(session, body, primary or seen.key, seen.repo, seen.url)
        cited = cite(session, seen.key, primary, f"{seen.title}\n{body or ''}", "pr", written_at)
        for text, at in comments:
            cited += cite(session, seen.key, primary, text, "comment", at)
        state, applied = pull.state, pull.outcome_evidence
    log.info(
        "%s (%s): tickets %s, %d lessons captured, %d cites",
        seen.key,
        state,
        ", ".join(tickets) or "none",
        len(added),
        cited,
    )
    if state == "open" or not news:
        return
    evidence = evidence_of(seen)
    if applied == evidence:
        log.info("%s: the outcome of this %s was applied already", seen.key, state)
        return
    if state != "merged":
        refused = closer_may_reject(services, seen, closer or Closer(None))
        if refused is not None:
            raise Ignored(f"{seen.key} closed without merge, but {refused}; outcome not applied")
    demote = services.settings.demote_policy == "always" or (
        state != "merged" and flagged(services, labels, tickets, seen.installation_id)
    )
    with db.transaction(services.engine) as session:
        pull = tracking.observe(session, seen)[0]
        if pull.outcome_evidence == evidence:
            return  # another worker applied it meanwhile
        outcome = tracking.apply_outcome(
            session,
            pull,
            actor=f"{ACTOR} ({seen.key} {state})",
            demote=demote,
            evidence_at=seen.merged_at or seen.closed_at,
        )
        pull.outcome_evidence = evidence
    log.info(
        "%s %s: demoted %s, restored %s, approved %s, %d cites settled%s",
        seen.key,
        state,
        outcome.demoted or "none",
        outcome.restored or "none",
        outcome.approved or "none",
        outcome.settled,
        f"; kept {outcome.kept_because}" if outcome.kept_because else "",
    )


def cite_commits(services: Services, seen: PullRequestState, ticket: str | None) -> None:
    """Bullet ids in the PR's commit messages are cites too (they need the GitHub API)."""
    ref = TicketRef.github(seen.repo, seen.number, seen.installation_id)

    done, found = effect(services, ref, "read_commits", lambda: services.out.commit_messages(ref))
    if not done or not found:
        return
    with db.transaction(services.engine) as session:
        cite(session, seen.key, ticket, "\n".join(found), "commit")

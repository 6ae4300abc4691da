"""Pull requests: link tickets, capture lessons, record cites, and apply the outcome."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from bot.effects import TicketRef
from bot.handlers.context import effect, require, when
from bot.handlers.router import Event, router
from playbook import db, lifecycle, tracking, usage
from playbook.capture import lessons_in
from playbook.links import bullet_ids, pull_request_links
from playbook.models import Bullet
from playbook.tracking import PullRequestState

if TYPE_CHECKING:
    from bot.worker import Services

log = logging.getLogger(__name__)
ACTOR = "playbook-bot"


def pr_state(payload: dict[str, Any], installation_id: int | None) -> PullRequestState:
    """What a pull_request payload says about the PR."""
    pr = require(payload, "pull_request")
    repo = require(payload, "repository", "full_name")
    number = int(require(pr, "number"))
    state = "merged" if pr.get("merged") else str(pr.get("state") or "open")
    return PullRequestState(
        key=f"{repo}#{number}",
        repo=repo,
        number=number,
        title=str(pr.get("title") or ""),
        head_ref=str((pr.get("head") or {}).get("ref") or ""),
        url=pr.get("html_url"),
        state=state,
        updated_at=when(pr.get("updated_at")),
        closed_at=when(pr.get("closed_at")),
        merged_at=when(pr.get("merged_at")),
        installation_id=installation_id,
    )


def scope_of(ticket: str, repo: str) -> str:
    """Lessons learned from a Jira ticket serve its project; from a GitHub issue, its repo."""
    return repo if "#" in ticket else ticket.rsplit("-", 1)[0]


def cite(session: Session, pr_key: str, ticket: str | None, text: str | None, origin: str) -> int:
    """Record the bullet ids in ``text`` as cites made in a PR, once per PR and bullet.

    A PR that names pb-12 in its body, a commit and a review is one piece of evidence
    about pb-12, so its outcome is one rating, not three.
    """
    ids = bullet_ids(text)
    if not ids:
        return 0
    known = set(session.scalars(select(Bullet.id).where(Bullet.id.in_(ids))))
    unknown = [bullet_id for bullet_id in ids if bullet_id not in known]
    if unknown:
        log.info("%s mentions unknown bullet ids %s; not cites", pr_key, ", ".join(unknown))
    ids = [bullet_id for bullet_id in ids if bullet_id in known]
    if not ids:
        return 0
    events = usage.record(
        session,
        "cited",
        ids,
        ticket_key=ticket,
        phase=origin,
        consumer="github",
        pr_key=pr_key,
        dedup_keys=[usage.once_key("cited", pr_key, i) for i in ids],
    )
    return len(events)


def capture(
    session: Session, body: str | None, ticket: str, repo: str, url: str | None
) -> list[str]:
    """Add the lessons of the body's Lessons section as proposed bullets; returns new ids.

    A lesson already captured from this PR (in any status) is not captured again, so
    an "opened" delivered after "closed" cannot bring back a demoted lesson.
    """
    added = []
    earlier = (
        list(session.scalars(select(Bullet.text).where(Bullet.source_url == url))) if url else []
    )
    for text in lessons_in(body):
        if any(lifecycle.word_overlap(text, old) >= lifecycle.DUPLICATE_OVERLAP for old in earlier):
            continue
        result = lifecycle.add(
            session,
            text,
            learned_from=ticket,
            actor=ACTOR,
            scope=scope_of(ticket, repo),
            status="proposed",
            source="pr_body",
            source_url=url,
            reason=f"Lessons section of {url or ticket}",
        )
        if result.created:
            added.append(result.bullet.id)
            earlier.append(text)
    return added


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
    seen = pr_state(event.payload, event.installation_id)
    pr = event.payload.get("pull_request") or {}
    labels = [
        str(item.get("name", "")) for item in pr.get("labels") or [] if isinstance(item, dict)
    ]
    apply_pull_request(services, seen, pr.get("body"), labels)
    if event.action == "synchronize":
        with db.transaction(services.engine) as session:
            tickets = tracking.tickets_of(session, seen.key)
        cite_commits(services, seen, tickets[0] if tickets else None)


def apply_pull_request(
    services: Services, seen: PullRequestState, body: str | None, labels: list[str]
) -> None:
    """What any news about a PR means: links, captured lessons, cites, and its outcome.

    Shared by the webhook handler and `backfill`, which walks closed PRs through the API.
    """
    links = pull_request_links(seen.title, seen.head_ref, body, seen.repo)
    kinds = [(key, "jira") for key in links.jira_keys] + [(key, "closes") for key in links.closes]
    with db.transaction(services.engine) as session:
        pull, news = tracking.observe(session, seen)
        tickets = tracking.link(session, seen.key, kinds)
        primary = next((t for t in links.tickets if t in tickets), tickets[0] if tickets else None)
        added = capture(session, body, primary or seen.key, seen.repo, seen.url)
        cited = cite(session, seen.key, primary, f"{seen.title}\n{body or ''}", "pr")
        state = pull.state
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
    demote = services.settings.demote_policy == "always" or (
        state != "merged" and flagged(services, labels, tickets, seen.installation_id)
    )
    with db.transaction(services.engine) as session:
        pull = tracking.observe(session, seen)[0]
        outcome = tracking.apply_outcome(
            session, pull, actor=f"{ACTOR} ({seen.key} {state})", demote=demote
        )
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

    def messages() -> list[str]:
        client = services.out.github.for_installation(seen.installation_id)  # type: ignore[attr-defined]
        pull = client.get_repo(seen.repo).get_pull(seen.number)
        return [commit.commit.message for commit in pull.get_commits()]

    if not hasattr(services.out, "github"):
        return
    done, found = effect(services, ref, "read_commits", messages)
    if not done or not found:
        return
    with db.transaction(services.engine) as session:
        cite(session, seen.key, ticket, "\n".join(found), "commit")

"""Pull requests, the tickets they link to, and the queries their outcomes are decided from."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.orm import Session

from playbook import clock
from playbook.models import Bullet, PullRequest, Revision, TicketLink, UsageEvent
from playbook.outcomes import seen_tickets


@dataclass(frozen=True)
class PullRequestState:
    """What a webhook payload says about a pull request."""

    key: str
    repo: str
    number: int
    title: str
    head_ref: str
    url: str | None
    state: str  # open | closed | merged
    updated_at: datetime | None
    closed_at: datetime | None = None
    merged_at: datetime | None = None
    installation_id: int | None = None
    # The commits a revert names ("This reverts commit <sha>"), as lower case hex.
    head_sha: str | None = None
    merge_commit_sha: str | None = None


def observe(session: Session, seen: PullRequestState) -> tuple[PullRequest, bool]:
    """Store what a delivery says about a PR; True when it is news.

    Deliveries arrive out of order (closed before opened, a redelivery days later), so
    a payload older than the one already applied does not move the state back.
    """
    pull = session.get(PullRequest, seen.key)
    now = clock.now()
    if pull is None:
        pull = PullRequest(key=seen.key, repo=seen.repo, number=seen.number, updated_at=now)
        session.add(pull)
    elif (
        pull.source_updated_at is not None
        and seen.updated_at is not None
        and seen.updated_at < pull.source_updated_at
    ):
        return pull, False
    # Equal timestamps: a closed/merged state is never undone by an "open" of the same moment.
    if (
        pull.source_updated_at is not None
        and seen.updated_at == pull.source_updated_at
        and pull.state != "open"
        and seen.state == "open"
    ):
        return pull, False
    pull.title = seen.title
    pull.head_ref = seen.head_ref
    pull.url = seen.url
    pull.state = seen.state
    pull.closed_at = seen.closed_at
    pull.merged_at = seen.merged_at
    pull.installation_id = seen.installation_id or pull.installation_id
    # A payload without them (an older caller, a trimmed test payload) keeps what is known.
    pull.head_sha = seen.head_sha or pull.head_sha
    pull.merge_commit_sha = seen.merge_commit_sha or pull.merge_commit_sha
    pull.source_updated_at = seen.updated_at
    pull.updated_at = now
    session.flush()
    return pull, True


def link(session: Session, pr_key: str, tickets: Iterable[tuple[str, str]]) -> list[str]:
    """Link a PR to tickets given as (key, kind); returns every ticket the PR is linked to."""
    existing = set(
        session.scalars(select(TicketLink.ticket_key).where(TicketLink.pr_key == pr_key))
    )
    for ticket_key, kind in tickets:
        # A PR GitHub told us about names the ticket: agents' reports about it weigh.
        seen_tickets.saw(session, ticket_key, "pull_request")
        if ticket_key not in existing:
            session.add(
                TicketLink(ticket_key=ticket_key, pr_key=pr_key, kind=kind, created_at=clock.now())
            )
            existing.add(ticket_key)
    session.flush()
    return sorted(existing)


def tickets_of(session: Session, pr_key: str) -> list[str]:
    """The tickets a PR is linked to."""
    return list(
        session.scalars(
            select(TicketLink.ticket_key).where(TicketLink.pr_key == pr_key).order_by(TicketLink.id)
        )
    )


def pulls_of(session: Session, ticket_key: str) -> list[PullRequest]:
    """The PRs linked to a ticket."""
    return list(
        session.scalars(
            select(PullRequest)
            .join(TicketLink, TicketLink.pr_key == PullRequest.key)
            .where(TicketLink.ticket_key == ticket_key)
            .order_by(PullRequest.key)
        )
    )


def alive(pull: PullRequest) -> bool:
    """Whether a PR still stands for its ticket: open, or merged and not reverted.

    A revert is no work on the ticket it names (its title quotes the reverted PR's), so it
    never keeps the ticket's lessons.
    """
    if pull.reverts is not None:
        return False
    return pull.state == "open" or (pull.state == "merged" and pull.reverted_by is None)


def learned_from(session: Session, ticket_key: str) -> list[Bullet]:
    """The bullets learned from a ticket."""
    return list(
        session.scalars(select(Bullet).where(Bullet.learned_from == ticket_key).order_by(Bullet.id))
    )


def cites_in(session: Session, pr_key: str) -> list[int]:
    """The ids of the cite events made in a PR."""
    return list(
        session.scalars(
            select(UsageEvent.id).where(UsageEvent.pr_key == pr_key, UsageEvent.kind == "cited")
        )
    )


# Revisions that change a bullet's status; one made by a person after a PR's closing means the
# person's word is newer than that evidence.
STATUS_ACTIONS = ("approve", "deprecate", "archive", "restore", "revert", "supersede")


def changed_by_hand_since(session: Session, bullet_id: str, since: datetime, bot: str) -> bool:
    """Whether someone other than ``bot`` changed the bullet's status after ``since``."""
    return (
        session.scalars(
            select(Revision.id).where(
                Revision.bullet_id == bullet_id,
                Revision.action.in_(STATUS_ACTIONS),
                Revision.at > since,
                Revision.actor.not_like(f"{bot}%"),
            )
        ).first()
        is not None
    )


def source_pull(session: Session, bullet: Bullet, pull: PullRequest) -> PullRequest | None:
    """The other PR whose Lessons section a bullet was captured from, if it is stored.

    A lesson captured from a PR's Lessons section belongs to that PR: another PR for the
    same ticket merging says nothing about it.
    """
    if bullet.source != "pr_body" or not bullet.source_url or bullet.source_url == pull.url:
        return None
    source = session.scalars(select(PullRequest).where(PullRequest.url == bullet.source_url))
    return source.first()

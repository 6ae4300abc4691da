"""Which closed PRs a rating backfill queues: lessons shown, not cited, not rated, no job yet."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from sqlalchemy import literal, select
from sqlalchemy.orm import Session

from playbook.deliveries.inbox import JOB_SOURCE
from playbook.models import Delivery, PullRequest, Rating, TicketLink, UsageEvent
from playbook.outcomes import tracking
from playbook.ratings import targets

# One run queues this many PRs at most, the most recently closed first: a first run over a
# long history must not put thousands of model calls in the queue at once (the daily budget
# would spread them over weeks anyway); the next run takes the following ones.
MAX_PULLS = 500
# A PR's rating job is the inbox row with this delivery id prefix and the PR's key
# (`bot.model_jobs.rate_id`): one per PR, ever.
JOB_PREFIX = "rate:"
# A dead job (its model failed for good) may be queued again; any other status means the PR
# waits for, is in, or went through a rating job already.
REQUEUED = "dead"
# PRs are read in pages of this many, so a long window is never held in memory at once.
PAGE = 200


@dataclass(frozen=True)
class Candidate:
    """A closed PR with lessons to rate: the lessons' ids, and whether its job died before."""

    key: str
    repo: str
    number: int
    closed_at: datetime | None
    lessons: list[str]
    dead: bool = False


@dataclass
class Queued:
    """What a backfill found and queued: ``more`` when it stopped at `MAX_PULLS`."""

    found: list[Candidate] = field(default_factory=list)
    queued: list[str] = field(default_factory=list)
    more: bool = False
    dry_run: bool = False


def candidates(session: Session, since: datetime, *, limit: int = MAX_PULLS) -> list[Candidate]:
    """Closed PRs since ``since`` whose tickets were shown lessons it did not cite, unrated.

    Newest closed first, at most ``limit``. A PR with any rating, or whose rating job waits,
    runs, finished or was ignored, is left out; one whose job died is in, marked ``dead``.
    """
    job = (
        select(Delivery.status)
        .where(
            Delivery.source == JOB_SOURCE,
            Delivery.delivery_id == literal(JOB_PREFIX) + PullRequest.key,
        )
        .scalar_subquery()
    )
    loaded = (
        select(UsageEvent.id)
        .where(UsageEvent.ticket_key == TicketLink.ticket_key, UsageEvent.kind == "loaded")
        .exists()
    )
    shown = select(TicketLink.id).where(TicketLink.pr_key == PullRequest.key, loaded).exists()
    rated = select(Rating.id).where(Rating.pr_key == PullRequest.key).exists()
    query = (
        select(PullRequest.key, PullRequest.repo, PullRequest.number, PullRequest.closed_at, job)
        .where(
            PullRequest.state.in_(("merged", "closed")),
            PullRequest.closed_at >= since,
            shown,
            ~rated,
            (job.is_(None)) | (job == REQUEUED),
        )
        .order_by(PullRequest.closed_at.desc(), PullRequest.key.desc())
    )
    found: list[Candidate] = []
    offset = 0
    while len(found) < limit:
        page = session.execute(query.offset(offset).limit(PAGE)).all()
        for key, repo, number, closed_at, status in page:
            lessons = targets.to_rate(session, key, tracking.tickets_of(session, key))
            if lessons:
                dead = status == REQUEUED
                found.append(Candidate(key, repo, number, closed_at, [b.id for b in lessons], dead))
                if len(found) == limit:
                    break
        if len(page) < PAGE:
            break
        offset += PAGE
    return found

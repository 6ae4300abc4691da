"""Pending proposals in batches: a PR's review proposals together, every other proposal alone.

A maintainer reviews what one PR's feedback taught as one batch (approve all, reject all), so the
page, the API and MCP list the same batches from here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from urllib.parse import urlsplit

from pydantic import BaseModel, Field
from sqlalchemy import select
from sqlalchemy.orm import Session

from playbook import agents
from playbook.models import Bullet
from playbook.reviews.proposals import SOURCE

# The key of the batch of proposals with no source_url at all.
OTHER = "other"
# Bounds on what is parsed: a URL longer than this is no link a maintainer needs to follow.
MAX_URL = 2_048
MAX_NAME = 100
MAX_NUMBER_DIGITS = 10
# A page never lists more: the oldest beyond it wait for the next look.
LIMIT = 500


@dataclass(frozen=True)
class PullRef:
    """The PR a review proposal came from: `owner/repo#7` and its link."""

    key: str
    url: str


@dataclass
class Batch:
    """Proposals reviewed together: one PR's review proposals, or one other proposal."""

    key: str
    url: str | None  # the PR's link; None for a batch that is not a PR's
    pull: bool
    proposals: list[Bullet] = field(default_factory=list)

    @property
    def newest(self) -> datetime | None:
        """When the batch's newest proposal was made."""
        return max((bullet.created_at for bullet in self.proposals), default=None)

    @property
    def ids(self) -> list[str]:
        """The ids of the batch's proposals, oldest first."""
        return [bullet.id for bullet in self.proposals]


def _name(part: str) -> bool:
    """A GitHub owner or repository name: bounded, no odd characters."""
    return 0 < len(part) <= MAX_NAME and all(c.isalnum() or c in "-_." for c in part)


def pull_of(url: str | None) -> PullRef | None:
    """The PR a URL points into (`https://host/o/r/pull/7#...`), or None; split, never a regex."""
    if not url or len(url) > MAX_URL:
        return None
    try:
        parts = urlsplit(url)
    except ValueError:
        return None
    if parts.scheme not in ("http", "https") or not parts.netloc:
        return None
    segments = parts.path.split("/", 5)  # ['', owner, repo, 'pull', number, rest...]
    if len(segments) < 5 or segments[0] != "" or segments[3] != "pull":
        return None
    owner, repo, number = segments[1], segments[2], segments[4]
    if not (_name(owner) and _name(repo)):
        return None
    if not (0 < len(number) <= MAX_NUMBER_DIGITS and number.isascii() and number.isdigit()):
        return None
    number = str(int(number))
    return PullRef(
        key=f"{owner}/{repo}#{number}",
        url=f"{parts.scheme}://{parts.netloc}/{owner}/{repo}/pull/{number}",
    )


def is_review(bullet: Bullet) -> bool:
    """Whether a proposal came from review feedback (the heuristic's or a model's)."""
    return bool(bullet.source and bullet.source.startswith(SOURCE))


def batches(session: Session, *, limit: int = LIMIT) -> list[Batch]:
    """Pending proposals in batches, newest batch first; a batch's proposals oldest first."""
    waiting = session.scalars(
        select(Bullet)
        .where(Bullet.status == "proposed")
        .order_by(Bullet.created_at.desc(), Bullet.id.desc())
        .limit(limit)
    ).all()
    found: dict[str, Batch] = {}
    alone: list[Batch] = []
    for bullet in sorted(waiting, key=lambda b: (b.created_at, _number(b.id))):
        pull = pull_of(bullet.source_url) if is_review(bullet) else None
        if pull is None:
            alone.append(Batch(key=bullet.source_url or OTHER, url=None, pull=False))
            alone[-1].proposals.append(bullet)
            continue
        batch = found.setdefault(pull.key, Batch(key=pull.key, url=pull.url, pull=True))
        batch.proposals.append(bullet)
    every = [*found.values(), *alone]
    every.sort(key=lambda b: (b.newest, _number(b.proposals[-1].id)), reverse=True)
    return every


def _number(bullet_id: str) -> int:
    """The n of `pb-n`, so pb-10 comes after pb-9 when two were made in the same instant."""
    tail = bullet_id.rpartition("-")[2]
    return int(tail) if tail.isdigit() and len(tail) <= 18 else 0


def batch(session: Session, key: str) -> Batch | None:
    """The PR batch with this key (`owner/repo#7`) as it is now, or None."""
    return next((b for b in batches(session) if b.pull and b.key == key), None)


class ProposalBatch(BaseModel):
    """A batch as the API and MCP return it."""

    key: str = Field(description="owner/repo#n for a PR's batch; else the source URL or 'other'.")
    url: str | None = Field(description="The PR's page for a PR's batch; null otherwise.")
    pull: bool = Field(description="True for the review proposals of one PR.")
    proposals: list[agents.Lesson] = Field(
        description="Oldest first; each source_url is its comment."
    )


class ProposalBatches(BaseModel):
    """Every pending proposal, in batches, newest batch first."""

    proposals: int = Field(description="How many proposals the batches hold.")
    batches: list[ProposalBatch]


def listing(session: Session, caller: agents.Caller) -> ProposalBatches:
    """The batches for a maintainer; an agent token may propose, not review proposals."""
    if caller.role != "maintainer":
        raise agents.Forbidden("only a maintainer may list proposals; agents may propose")
    found = [
        ProposalBatch(
            key=batch.key,
            url=batch.url,
            pull=batch.pull,
            proposals=[agents.lesson(bullet) for bullet in batch.proposals],
        )
        for batch in batches(session)
    ]
    return ProposalBatches(proposals=sum(len(b.proposals) for b in found), batches=found)


__all__ = [
    "OTHER",
    "Batch",
    "ProposalBatch",
    "ProposalBatches",
    "PullRef",
    "batch",
    "batches",
    "is_review",
    "listing",
    "pull_of",
]

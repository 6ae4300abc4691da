"""Each experiment ticket's outcome, recomputed from its linked pull requests and their reviews.

A ticket's outcome is never accumulated from deliveries: every refresh reads the truth (its
ticket links, their pull requests' stored states, the changes-requested reviews kept) and
writes the result, so a redelivery, an out-of-order delivery or a backfill over PRs already
seen leaves the same row.

- ``merged``: a linked PR merged (the first merge's time is ``merged_at``), whatever else
  happened; a PR closed unmerged before it still sets ``closed_unmerged``, so both facts stay.
- ``open``: none merged and one is still open, even if another closed unmerged: the ticket's
  work is still going on, so it has no outcome yet.
- ``closed``: every linked PR closed unmerged.
- None: no PR is linked (yet).

A reverted PR counts as closed unmerged (the team undid its work), and a revert, which names
the reverted PR's ticket in its title, counts for nothing: neither is a merge of the ticket.

Only ``merged`` and ``closed`` are outcomes in the report; ``open`` tickets and those without
a PR count as tickets but not as tickets with an outcome.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.orm import Session

from playbook import db
from playbook.experiment import assignment
from playbook.models import ExperimentAssignment, ExperimentReview, PullRequest, TicketLink

# Outcomes that end a ticket: the report's "with an outcome".
FINAL = ("merged", "closed")
# GitHub's webhook says ``changes_requested``; its REST API ``CHANGES_REQUESTED``.
CHANGES_REQUESTED = "changes_requested"


@dataclass(frozen=True)
class Outcome:
    """What a ticket's linked pull requests say: the columns ``refresh`` stores."""

    outcome: str | None
    merged_at: datetime | None
    closed_unmerged: bool
    review_rounds: int


def decide(pulls: Iterable[PullRequest], reviews: Iterable[datetime]) -> Outcome:
    """A ticket's outcome from its linked PRs and the times of changes-requested reviews on them.

    Review rounds count the reviews submitted before the first merge: requests after it
    (on a follow-up PR, say) changed nothing the merge measured. Without a merge, all so far.
    """
    states = []
    merges = []
    for pull in pulls:
        if pull.reverts is not None:
            continue  # a revert is no attempt at the ticket
        if pull.state == "merged" and pull.reverted_by is not None:
            states.append("closed")
            continue
        states.append(pull.state)
        if pull.state == "merged":
            # A merged PR stored without its time: its closing (or last update) is the best
            # time known, so the ticket still counts as merged.
            merges.append(pull.merged_at or pull.closed_at or pull.updated_at)
    merged_at = min(merges) if merges else None
    if merged_at is not None:
        outcome: str | None = "merged"
    elif "open" in states:
        outcome = "open"
    elif states:
        outcome = "closed"
    else:
        outcome = None
    rounds = sum(1 for at in reviews if merged_at is None or at < merged_at)
    return Outcome(outcome, merged_at, "closed" in states, rounds)


def refresh(session: Session, ticket_refs: Iterable[str]) -> int:
    """Recompute and store the outcome of each given ticket in the experiment; how many changed.

    Tickets are found by their canonical key; their links by every spelling known (the key
    as the bot stored it on enrollment, the spellings given, the canonical one), since
    ``ticket_links`` keeps keys as the PR spelled them. Tickets outside the experiment are
    skipped. Call it in the transaction that stored the PR's state and links.
    """
    given: dict[str, set[str]] = defaultdict(set)
    for ref in ticket_refs:
        if ref:
            given[assignment.canonical(ref)].add(ref)
    if not given:
        return 0
    rows = session.scalars(
        select(ExperimentAssignment).where(ExperimentAssignment.ticket_key.in_(given))
    ).all()
    if not rows:
        return 0
    spellings = {
        row.ticket_key: given[row.ticket_key] | {row.ticket_key, row.ticket_ref or row.ticket_key}
        for row in rows
    }
    every = set().union(*spellings.values())
    linked: dict[str, set[str]] = defaultdict(set)
    for ticket_ref, pr_key in session.execute(
        select(TicketLink.ticket_key, TicketLink.pr_key).where(TicketLink.ticket_key.in_(every))
    ):
        linked[assignment.canonical(ticket_ref)].add(pr_key)
    pr_keys = set().union(*linked.values()) if linked else set()
    pulls = {
        pull.key: pull
        for pull in session.scalars(select(PullRequest).where(PullRequest.key.in_(pr_keys)))
    }
    reviews: dict[str, list[datetime]] = defaultdict(list)
    for pr_key, at in session.execute(
        select(ExperimentReview.pr_key, ExperimentReview.submitted_at).where(
            ExperimentReview.pr_key.in_(pr_keys)
        )
    ):
        reviews[pr_key].append(at)
    changed = 0
    for row in rows:
        mine = sorted(linked.get(row.ticket_key, ()))
        found = decide(
            (pulls[key] for key in mine if key in pulls),
            (at for key in mine for at in reviews.get(key, ())),
        )
        stored = Outcome(row.outcome, row.merged_at, row.closed_unmerged, row.review_rounds)
        if stored != found:
            row.outcome, row.merged_at = found.outcome, found.merged_at
            row.closed_unmerged, row.review_rounds = found.closed_unmerged, found.review_rounds
            changed += 1
    session.flush()
    return changed


def record_review(
    session: Session, review_id: int, pr_key: str, state: str, submitted_at: datetime
) -> bool:
    """Keep a changes-requested review of a PR once (by GitHub's review id); True when new.

    Other reviews (approved, commented, dismissed) are no review round and are not kept.
    Kept whether or not the PR is linked to an experiment ticket yet: a link can come later
    (an edited title), and the refresh then finds the review.
    """
    if state.strip().lower() != CHANGES_REQUESTED:
        return False
    # RETURNING, not rowcount: psycopg reports -1 for an INSERT ... ON CONFLICT DO NOTHING.
    inserted = session.execute(
        db.conflict_insert(session, ExperimentReview)
        .values(review_id=review_id, pr_key=pr_key, submitted_at=submitted_at)
        .on_conflict_do_nothing(index_elements=["review_id"])
        .returning(ExperimentReview.review_id)
    )
    return inserted.first() is not None

"""How much an agent's self-reported load or cite weighs: what it may move, and what it may not.

Observed evidence (the bot's own comments and searches, a PR's cites settled by its merge or
closing on GitHub) is the strong signal. What a token *reports* through the API, MCP, the CLI
or an imported log is weaker, and bounded per source so that no flood of reports can rate a
lesson:

- About a ticket the bot has never seen (no signed delivery named it), a report is recorded
  for reporting only: it moves no counter, confidence, ranking or pruning.
- About a seen ticket, a load or cite counts as use, once per (lesson, ticket, kind).
- Its outcome (``phaseSuccess``) counts as a rating only if this source has rated no other
  cite of the lesson (one rating per source and lesson, ever) and the lesson's self-reported
  ratings stay no more than its ratings observed from PRs. Otherwise the claim is kept on the
  event (``claimed_success``) and rates nothing.

So one source adds at most one rating to one lesson, and only to a lesson GitHub already
rated: its confidence moves by at most 1/6 (``MAX_CONFIDENCE_SHIFT``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from fractions import Fraction

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from playbook.models import Bullet, UsageEvent
from playbook.outcomes import seen_tickets

# Ratings one source (token, CLI user, import) may add to one lesson, ever.
RATINGS_PER_SOURCE = 1
# The most one rating can move `ranking.confidence`: with s successes of n ratings it moves
# from (s+1)/(n+2) to (s+2)/(n+3) or (s+1)/(n+3), at most (n+1)/((n+2)(n+3)), which is largest,
# 1/6, for n = 0 or 1 (and self-reports need n >= 1 observed ratings to count at all).
MAX_CONFIDENCE_SHIFT = Fraction(1, 6)

UNKNOWN_TICKET = "unknown_ticket"
ONE_PER_SOURCE = "one_per_source"
NEEDS_PR_EVIDENCE = "needs_pr_evidence"
# What each discount means, for answers that explain themselves.
DISCOUNTS = {
    UNKNOWN_TICKET: "the bot has seen no delivery about the ticket: recorded, but moves nothing",
    ONE_PER_SOURCE: "this token already rated the lesson: the outcome is kept, not counted",
    NEEDS_PR_EVIDENCE: "self-reported ratings may not outnumber the lesson's PR ratings: "
    "the outcome is kept, not counted",
}


@dataclass(frozen=True)
class Weight:
    """What one reported event moves: use (``counted``), and a rating (``success``) or not."""

    counted: bool
    success: bool | None = None
    claimed: bool | None = None
    discount: str | None = None


class Weigher:
    """Weighs one call's reports from one source, keeping the caps across the call's events."""

    def __init__(self, session: Session, source: str, tickets: Iterable[str | None]) -> None:
        self.session = session
        self.source = source
        self.seen = seen_tickets.seen(session, (t for t in tickets if t))
        self._by_source: dict[str, int] = {}
        self._reported: dict[str, int] = {}
        self._observed: dict[str, int] = {}

    def weigh(self, kind: str, bullet_id: str, ticket: str | None, claim: bool | None) -> Weight:
        """The weight of a new report of ``kind`` about ``bullet_id`` on ``ticket``."""
        if ticket not in self.seen:
            return Weight(counted=False, claimed=claim, discount=UNKNOWN_TICKET)
        if kind != "cited" or claim is None:
            return Weight(counted=True)
        discount = self._rating_refused(bullet_id)
        if discount is not None:
            return Weight(counted=True, claimed=claim, discount=discount)
        self._by_source[bullet_id] += 1
        self._reported[bullet_id] += 1
        return Weight(counted=True, success=claim)

    def _rating_refused(self, bullet_id: str) -> str | None:
        if bullet_id not in self._by_source:
            # Locks the lesson's row on PostgreSQL (SQLite has one writer anyway), so two
            # requests of one token cannot both take the lesson's one rating.
            self.session.execute(select(Bullet.id).where(Bullet.id == bullet_id).with_for_update())
            rated = UsageEvent.bullet_id == bullet_id, UsageEvent.success.is_not(None)
            self._by_source[bullet_id] = self._count(*rated, UsageEvent.source == self.source)
            self._reported[bullet_id] = self._count(*rated, UsageEvent.source.is_not(None))
            self._observed[bullet_id] = self._count(*rated, UsageEvent.pr_key.is_not(None))
        if self._by_source[bullet_id] >= RATINGS_PER_SOURCE:
            return ONE_PER_SOURCE
        if self._reported[bullet_id] + 1 > self._observed[bullet_id]:
            return NEEDS_PR_EVIDENCE
        return None

    def _count(self, *conditions: object) -> int:
        query = select(func.count()).select_from(UsageEvent).where(*conditions)  # type: ignore[arg-type]
        return int(self.session.scalar(query) or 0)

    def may_change(self, event: UsageEvent) -> bool:
        """Whether a repeated report may change ``event``'s outcome: only its own source's."""
        return event.source == self.source and event.counted

    def weigh_again(self, event: UsageEvent, claim: bool) -> Weight:
        """The weight of an outcome reported again for ``event`` (same ticket and lesson).

        A rating the source already holds may change side; a cite recorded without an
        outcome takes one under the same caps as a new report.
        """
        if event.success is not None:
            return Weight(counted=True, success=claim)
        if event.claimed_success is not None:
            return Weight(counted=True, claimed=claim, discount=event.discount)
        return self.weigh("cited", event.bullet_id, event.ticket_key, claim)

"""Activity per ISO week: loads, cites, PR outcomes, demotions and ticket coverage over time."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta

from sqlalchemy import ColumnElement, String, case, cast, func, literal, select
from sqlalchemy.orm import Session

from playbook import clock
from playbook.models import PullRequest, Retrieval, Revision, UsageEvent
from playbook.search.retrieval import HELD_OUT

# The revisions that take a lesson out of retrieval: demoted by a rejected PR or by hand,
# archived (pruned as unused, or a creation undone), or superseded by a newer lesson.
DEMOTING_ACTIONS = ("deprecate", "archive", "supersede")


@dataclass(frozen=True)
class Week:
    """What happened in one ISO week (Monday 00:00 UTC to the next Monday)."""

    start: date
    loads: int = 0
    cites: int = 0
    merged: int = 0
    rejected: int = 0
    demotions: int = 0
    tickets: int = 0
    covered: int = 0

    @property
    def coverage(self) -> float | None:
        """The share of this week's new tickets that got a lesson (None without new tickets)."""
        return self.covered / self.tickets if self.tickets else None


def week_start(moment: datetime) -> datetime:
    """Monday 00:00 UTC of the ISO week ``moment`` falls in."""
    day = clock.to_utc(moment).date()
    return datetime.combine(day - timedelta(days=day.weekday()), time(), UTC)


def weekly(session: Session, *, weeks: int = 12, now: datetime | None = None) -> list[Week]:
    """One `Week` per ISO week, oldest first, ending with the current week; empty weeks too.

    Loads and cites count events, like the usage totals of `upkeep.stats`. ``merged`` and
    ``rejected`` count pull requests with at least one cite, by the week they merged or
    closed unmerged; a merge later reverted counts as rejected (its cites are failures), in
    the week it merged. A ticket counts in the week of its first search, and as covered when
    any of its searches showed a lesson: the same rule as the coverage of `upkeep.stats`,
    so the weeks add up to its totals once the window holds every ticket.
    """
    if weeks < 1:
        raise ValueError(f"weeks must be at least 1, not {weeks}")
    first = week_start(now or clock.now()) - timedelta(weeks=weeks - 1)
    bounds = [first + timedelta(weeks=n) for n in range(weeks + 1)]

    def events(kind: str) -> list[tuple[int, int]]:
        # Reports that weigh nothing stay out, as in `upkeep.stats`.
        return _per_week(
            session, UsageEvent.ts, bounds, UsageEvent.kind == kind, UsageEvent.counted
        )

    cited_prs = select(UsageEvent.pr_key).where(
        UsageEvent.kind == "cited", UsageEvent.pr_key.is_not(None)
    )
    merged = _per_week(
        session,
        PullRequest.merged_at,
        bounds,
        PullRequest.state == "merged",
        PullRequest.reverted_by.is_(None),
        PullRequest.key.in_(cited_prs),
    )
    rejected = _per_week(
        session,
        PullRequest.closed_at,
        bounds,
        (PullRequest.state == "closed")
        | ((PullRequest.state == "merged") & PullRequest.reverted_by.is_not(None)),
        PullRequest.key.in_(cited_prs),
    )
    demotions = _per_week(session, Revision.at, bounds, Revision.action.in_(DEMOTING_ACTIONS))
    # JSON functions differ between SQLite and PostgreSQL, but the stored text does not: a
    # list holding at least one id has a quote in it, while "[]" and "null" have none.
    shown = cast(Retrieval.bullet_ids, String).contains('"')
    tickets = (
        select(
            func.min(Retrieval.at).label("first"),
            func.max(case((shown, 1), else_=0)).label("covered"),
        )
        # A held-out ticket is shown nothing by design: as before its search was logged, it
        # is not a ticket coverage counts.
        .where(Retrieval.ticket_key.is_not(None), Retrieval.rank_by != HELD_OUT)
        .group_by(Retrieval.ticket_key)
        .having(func.min(Retrieval.at) >= bounds[0])
        .subquery()
    )
    new_tickets = _per_week(session, tickets.c.first, bounds, flag=tickets.c.covered)
    loads, cites = events("loaded"), events("cited")
    return [
        Week(
            start=bounds[n].date(),
            loads=loads[n][0],
            cites=cites[n][0],
            merged=merged[n][0],
            rejected=rejected[n][0],
            demotions=demotions[n][0],
            tickets=new_tickets[n][0],
            covered=new_tickets[n][1],
        )
        for n in range(weeks)
    ]


def _per_week(
    session: Session,
    when: ColumnElement[datetime],
    bounds: list[datetime],
    *criteria: ColumnElement[bool],
    flag: ColumnElement[int] | None = None,
) -> list[tuple[int, int]]:
    """(rows, sum of ``flag``) per week between ``bounds``, counted in the database.

    The week index is a CASE over the bounds rather than a date function, because date
    arithmetic is spelled differently by every database.
    """
    steps = [(when < bound, n) for n, bound in enumerate(bounds[1:-1])]
    week = case(*steps, else_=len(bounds) - 2) if steps else literal(len(bounds) - 2)
    rows = (
        select(week.label("week"), (flag if flag is not None else literal(0)).label("flag"))
        .where(when >= bounds[0], when < bounds[-1], *criteria)
        .subquery()
    )
    # Grouped in an outer query: PostgreSQL does not see a CASE with bound parameters in
    # the SELECT list and the same CASE in GROUP BY as one expression.
    counts = [(0, 0)] * (len(bounds) - 1)
    for index, count, flagged in session.execute(
        select(rows.c.week, func.count(), func.coalesce(func.sum(rows.c.flag), 0)).group_by(
            rows.c.week
        )
    ):
        counts[index] = (int(count), int(flagged))
    return counts

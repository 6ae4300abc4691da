"""Weekly activity: counts per ISO week, empty weeks, and the Monday 00:00 UTC boundaries."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta, timezone

import pytest
from sqlalchemy import Engine

from playbook import activity, clock, upkeep
from playbook.db import transaction
from playbook.lessons import lifecycle
from playbook.models import Retrieval
from playbook.outcomes import tracking, usage

# A Wednesday; the four weeks up to it start on Feb 23, Mar 2, Mar 9 and Mar 16 (ISO week 12).
NOW = datetime(2026, 3, 18, 12, 0, tzinfo=UTC)
MONDAY = datetime(2026, 3, 2, tzinfo=UTC)  # the start of the second of those weeks
TICK = timedelta(microseconds=1)


def moment(month: int, day: int, hour: int = 12) -> datetime:
    return datetime(2026, month, day, hour, tzinfo=UTC)


def add(engine: Engine, text: str) -> str:
    with clock.frozen(moment(2, 1)), transaction(engine) as session:
        return lifecycle.add(session, text, learned_from="OLD-1", actor="t").bullet.id


def event(
    engine: Engine, kind: str, bullet_id: str, at: datetime, *, pr: str | None = None
) -> None:
    with clock.frozen(at), transaction(engine) as session:
        usage.record(session, kind, [bullet_id], ticket_key="T-1", pr_key=pr)


def searched(engine: Engine, ticket: str | None, at: datetime, shown: list[str]) -> None:
    with transaction(engine) as session:
        session.add(
            Retrieval(ticket_key=ticket, query_id="q", rank_by="feedback", bullet_ids=shown, at=at)
        )


def pull(engine: Engine, number: int, state: str, at: datetime | None = None) -> None:
    with clock.frozen(at or NOW), transaction(engine) as session:
        tracking.observe(
            session,
            tracking.PullRequestState(
                key=f"acme/app#{number}",
                repo="acme/app",
                number=number,
                title="t",
                head_ref="h",
                url=None,
                state=state,
                updated_at=at,
                closed_at=at if state != "open" else None,
                merged_at=at if state == "merged" else None,
            ),
        )


def weekly(engine: Engine, weeks: int = 4, now: datetime | None = NOW) -> list[activity.Week]:
    with transaction(engine) as session:
        return activity.weekly(session, weeks=weeks, now=now)


@pytest.fixture
def weekly_history(engine: Engine) -> Engine:
    """Three lessons about caches and four weeks of what happened to them: searches for
    tickets, loads and cites (in and outside PRs), and the PRs that were merged or closed."""
    one, two, three = (add(engine, f"Lesson number {n} about caches") for n in (1, 2, 3))
    # Tickets: one first searched before the window, one on each side of a Monday midnight
    # (the one before it shown a lesson only on its second search), one never shown any.
    searched(engine, "T-OLD", moment(2, 10), [one])
    searched(engine, "T-OLD", moment(3, 10), [one])
    searched(engine, "T-EARLY", MONDAY - TICK, [])
    searched(engine, "T-EARLY", moment(3, 4), [two])
    searched(engine, "T-NEW", MONDAY, [one, two])
    searched(engine, "T-BARE", moment(3, 17), [])
    searched(engine, "T-BARE", moment(3, 17, 13), [])
    searched(engine, None, moment(3, 17), [one])  # a search for no ticket is no ticket
    event(engine, "loaded", three, moment(2, 20))  # before the window
    event(engine, "loaded", one, MONDAY)
    event(engine, "loaded", two, moment(3, 4))
    event(engine, "cited", one, moment(3, 5), pr="acme/app#1")
    event(engine, "cited", two, moment(3, 10), pr="acme/app#2")
    event(engine, "cited", two, moment(3, 17))  # a cite outside any PR
    event(engine, "cited", three, moment(3, 1), pr="acme/app#4")
    event(engine, "cited", three, moment(1, 20), pr="acme/app#5")
    pull(engine, 1, "merged", MONDAY + timedelta(weeks=1))  # cited, merged on a Monday 00:00
    pull(engine, 2, "closed", MONDAY + timedelta(weeks=2) - TICK)  # cited, rejected
    pull(engine, 3, "merged", moment(3, 11))  # merged, but nothing cited in it
    pull(engine, 4, "open")  # cited, still open
    pull(engine, 5, "merged", moment(1, 25))  # cited, merged before the window
    with clock.frozen(moment(3, 16)), transaction(engine) as session:
        lifecycle.deprecate(session, two, reason="pr_closed_unmerged", actor="t")
    with clock.frozen(moment(3, 17)), transaction(engine) as session:
        lifecycle.archive(session, three, reason="unused_30d", actor="t")
        lifecycle.restore(session, two, actor="t")  # not a demotion
        lifecycle.edit(session, one, actor="t", text="Lesson number 1 about caches, edited")
    return engine


def test_each_week_counts_what_happened_in_it(weekly_history: Engine) -> None:
    weeks = weekly(weekly_history)
    assert [w.start for w in weeks] == [
        date(2026, 2, 23),
        date(2026, 3, 2),
        date(2026, 3, 9),
        date(2026, 3, 16),
    ]
    assert weeks == [
        activity.Week(date(2026, 2, 23), cites=1, tickets=1, covered=1),
        activity.Week(date(2026, 3, 2), loads=2, cites=1, tickets=1, covered=1),
        activity.Week(date(2026, 3, 9), cites=1, merged=1, rejected=1),
        activity.Week(date(2026, 3, 16), cites=1, demotions=2, tickets=1),
    ]


def test_coverage_is_the_share_of_new_tickets_shown_a_lesson(weekly_history: Engine) -> None:
    assert [w.coverage for w in weekly(weekly_history)] == [1.0, 1.0, None, 0.0]


def test_the_weeks_add_up_to_the_totals_of_stats(weekly_history: Engine) -> None:
    weeks = weekly(weekly_history, weeks=12)  # reaches back to every ticket's first search
    with transaction(weekly_history) as session:
        totals = upkeep.stats(session, now=NOW)
    assert sum(w.tickets for w in weeks) == totals["coverage"]["tickets"] == 4
    assert sum(w.covered for w in weeks) == totals["coverage"]["with_lessons"] == 3
    assert sum(w.loads for w in weeks) == totals["usage"]["loads"] == 3
    assert sum(w.cites for w in weeks) == totals["usage"]["cites"] == 5


def test_empty_weeks_are_there_with_zeros(engine: Engine) -> None:
    weeks = weekly(engine, weeks=12)
    assert len(weeks) == 12
    assert weeks[-1].start == date(2026, 3, 16)
    # Consecutive Mondays, across the new year.
    assert [w.start for w in weeks] == [date(2025, 12, 29) + timedelta(weeks=n) for n in range(12)]
    assert all(w == activity.Week(w.start) for w in weeks)
    assert all(w.coverage is None for w in weeks)


def test_a_monday_midnight_starts_the_current_week(weekly_history: Engine) -> None:
    weeks = weekly(weekly_history, weeks=2, now=MONDAY + timedelta(weeks=2))
    assert [w.start for w in weeks] == [date(2026, 3, 9), date(2026, 3, 16)]
    assert weekly(weekly_history, weeks=1, now=MONDAY + timedelta(weeks=2) - TICK)[0].merged == 1


def test_the_current_week_comes_from_the_clock(weekly_history: Engine) -> None:
    with clock.frozen(NOW):
        assert weekly(weekly_history, now=None) == weekly(weekly_history)


def test_an_offset_time_is_read_in_utc(engine: Engine) -> None:
    # Monday 00:30 in Paris is still Sunday in UTC, so the week is the one before.
    paris_monday = datetime(2026, 3, 16, 0, 30, tzinfo=timezone(timedelta(hours=1)))
    assert weekly(engine, weeks=1, now=paris_monday)[0].start == date(2026, 3, 9)


def test_weeks_must_be_positive(engine: Engine) -> None:
    with pytest.raises(ValueError, match="at least 1"):
        weekly(engine, weeks=0)


def test_a_reverted_merge_counts_as_rejected_in_the_week_it_merged(engine: Engine) -> None:
    from playbook.models import PullRequest

    cited = add(engine, "Dedupe webhook retries")
    for number in (1, 2):
        pull(engine, number, "merged", moment(3, 10))
        event(engine, "cited", cited, moment(3, 9), pr=f"acme/app#{number}")
    with transaction(engine) as session:
        session.get(PullRequest, "acme/app#1").reverted_by = "acme/app#3"
    week = weekly(engine)[2]
    assert (week.start, week.merged, week.rejected) == (date(2026, 3, 9), 1, 1)

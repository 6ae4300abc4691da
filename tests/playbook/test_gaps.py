"""Gaps: recent tickets no lesson fitted, grouped by what they are about."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import Engine

from playbook import clock
from playbook.db import transaction
from playbook.experiment import holdout
from playbook.gaps import grouping, report
from playbook.gaps.report import Report, find
from playbook.search import retrieval
from tests.gaps_world import CLUSTER, NOW, OTHERS, a_lesson, searched, ticket


def gaps_of(engine: Engine, **options: object) -> Report:
    with transaction(engine) as session:
        return find(session, now=clock.now(), **options)  # type: ignore[arg-type]


def keys(report: Report) -> list[list[str]]:
    return [[t.key for t in gap.tickets] for gap in report.gaps]


def test_a_planted_cluster_is_a_gap_with_its_words(engine: Engine) -> None:
    searched(engine, OTHERS[:5] + CLUSTER + OTHERS[5:])
    found = gaps_of(engine)
    assert keys(found) == [["CTMS-101", "CTMS-102", "CTMS-103", "CTMS-104"]]
    [gap] = found.gaps
    # Words as written, not stems ("rebalance", not "rebalanc"); template headings are not.
    assert {"kafka", "consumer", "rebalance", "offset"} <= set(gap.words)
    assert not {"describe", "bug", "environment", "context", "ubuntu"} & set(gap.words)
    assert gap.tickets[0].title == CLUSTER[0][1]
    assert gap.first_seen < gap.last_seen
    assert gap.per_week == 4.0  # four tickets within a week
    assert (found.tickets, found.without_lessons) == (14, 14)


def test_tickets_sharing_only_the_template_are_not_grouped(engine: Engine) -> None:
    searched(engine, OTHERS)
    assert gaps_of(engine, minimum=2).gaps == []
    # Even when the template is most of each ticket's text.
    short = [
        (f"OPS-{n}", word, f"It is {word}.")
        for n, word in enumerate(["Flaky", "Crashes", "Stutters", "Freezes", "Leaks", "Hangs"], 1)
    ]
    searched(engine, short, at=NOW + timedelta(days=1))
    assert gaps_of(engine, minimum=2).gaps == []
    # The template's words weigh next to nothing (idf near zero): a threshold far below the
    # default still links none of these.
    assert gaps_of(engine, minimum=2, threshold=grouping.THRESHOLD / 5).gaps == []


def test_a_week_mostly_about_one_problem_is_a_gap(engine: Engine) -> None:
    # A small team's week: one problem reported five times, in the same words, among eight
    # tickets. Its words are in most of the week's tickets, and still what the tickets are
    # about, not a template's.
    body = "After a broker restart the consumer group rebalances and committed offsets are lost."
    same = [(f"OPS-{n}", f"Kafka rebalance storm loses offsets ({n})", body) for n in range(1, 6)]
    searched(engine, [*same, *OTHERS[:3]])
    assert keys(gaps_of(engine)) == [[key for key, _, _ in same]]


def test_tickets_that_got_a_lesson_are_left_out(engine: Engine) -> None:
    shown = a_lesson(engine)
    searched(engine, OTHERS + CLUSTER[:3])
    searched(engine, CLUSTER[3:], at=NOW + timedelta(hours=5), hits=[shown])
    assert keys(gaps_of(engine, minimum=3)) == [["CTMS-101", "CTMS-102", "CTMS-103"]]
    assert gaps_of(engine, minimum=4).gaps == []
    # A ticket shown a lesson once is covered, even if a later edit matched none.
    searched(engine, CLUSTER[:1], at=NOW + timedelta(hours=6), hits=[shown])
    assert gaps_of(engine, minimum=3).gaps == []


def test_held_out_tickets_count_only_when_no_lesson_would_have_fitted(engine: Engine) -> None:
    shown = a_lesson(engine)
    searched(engine, OTHERS + CLUSTER[:2])
    with transaction(engine) as session:
        clock.set_clock(lambda: NOW + timedelta(hours=3))
        for key, title, body in CLUSTER[2:]:
            retrieval.record_held_out(session, key, ticket(key, title, body), f"q-{key}")
        # CTMS-104 would have been shown a lesson: the playbook had one for it.
        holdout.record_exposures(
            session,
            "CTMS-104",
            "held_out",
            [(shown.bullet_id, 1)],
            query_id="q",
            consumer="playbook-bot",
            now=clock.now(),
        )
    # Oldest first: the held-out ones were searched for before the others.
    assert keys(gaps_of(engine)) == [["CTMS-103", "CTMS-101", "CTMS-102"]]


def test_days_and_min_are_respected(engine: Engine) -> None:
    searched(engine, CLUSTER[:2], at=NOW - timedelta(days=20))
    searched(engine, OTHERS + CLUSTER[2:])
    clock.set_clock(lambda: NOW + timedelta(days=2))
    assert gaps_of(engine, days=7, minimum=3).gaps == []
    assert keys(gaps_of(engine, days=7, minimum=2)) == [["CTMS-103", "CTMS-104"]]
    found = gaps_of(engine, days=30, minimum=4)
    assert keys(found) == [["CTMS-101", "CTMS-102", "CTMS-103", "CTMS-104"]]
    # Twenty days and eleven hours between the first and the last.
    assert found.gaps[0].per_week == round(4 / ((20 + 11 / 24) / 7), 2)
    assert gaps_of(engine, days=30, minimum=5).gaps == []


def test_largest_then_most_recent_first_and_the_same_every_time(engine: Engine) -> None:
    pdf = [
        ("CTMS-301", "PDF export misses embedded fonts", "Invoice PDF renders in a fallback font."),
        ("CTMS-302", "Embedded fonts missing from the PDF export", "PDF invoices lose fonts."),
        ("CTMS-303", "Exported PDF invoices have no embedded fonts", "Fonts fall back in PDF."),
    ]
    searched(engine, OTHERS[1:] + pdf)
    searched(engine, CLUSTER, at=NOW - timedelta(days=2))
    found = gaps_of(engine)
    assert [gap.size for gap in found.gaps] == [4, 4]
    # Same size: the group whose last ticket is newest first (the PDF one, with CTMS-202).
    assert found.gaps[0].tickets[0].key == "CTMS-202"
    assert keys(gaps_of(engine)) == keys(found)


def test_a_scope_sees_only_its_own_tickets(engine: Engine) -> None:
    elsewhere = [(f"OPS-{n}", title, body) for n, (_, title, body) in enumerate(CLUSTER, 1)]
    searched(engine, OTHERS + CLUSTER + elsewhere)
    everything = gaps_of(engine)
    assert [gap.size for gap in everything.gaps] == [8]
    mine = gaps_of(engine, scope="OPS")
    assert keys(mine) == [["OPS-1", "OPS-2", "OPS-3", "OPS-4"]]
    assert mine.tickets == 4
    # A prefix of another scope's name is not that scope.
    assert gaps_of(engine, scope="OP").tickets == 0


def test_only_the_newest_tickets_are_looked_at(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(report, "MAX_TICKETS", 14)
    searched(engine, OTHERS + CLUSTER)
    assert not gaps_of(engine).capped
    # One more report of the problem, older than all the others: left out.
    searched(engine, [("CTMS-100", *CLUSTER[0][1:])], at=NOW - timedelta(days=1))
    found = gaps_of(engine)
    assert found.capped and found.tickets == 14
    assert keys(found) == [["CTMS-101", "CTMS-102", "CTMS-103", "CTMS-104"]]

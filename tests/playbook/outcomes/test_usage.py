"""Usage events: loads and cites, outcomes, counters that agree with the log, concurrency."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import Engine, func, select

from playbook import clock
from playbook.db import transaction
from playbook.errors import BulletNotFound, InvalidInput
from playbook.lessons import lifecycle
from playbook.models import UsageEvent
from playbook.outcomes import usage

T0 = datetime(2026, 11, 3, 9, 0, tzinfo=UTC)


@pytest.fixture
def playbook(engine: Engine) -> Engine:
    with transaction(engine) as session:
        for text in ("Lesson about retries", "Lesson about locks", "Lesson about caches"):
            lifecycle.add(session, text, learned_from="CTMS-1", actor="seed")
    return engine


def bullet(engine: Engine, bullet_id: str):
    with transaction(engine) as session:
        return lifecycle.get(session, bullet_id)


def test_loads_and_cites_move_the_counters(playbook: Engine) -> None:
    with clock.frozen(T0), transaction(playbook) as session:
        usage.record(session, "loaded", ["pb-1", "pb-2"], ticket_key="CTMS-7", ranks=[1, 2])
    with clock.frozen(T0 + timedelta(hours=1)), transaction(playbook) as session:
        usage.record(session, "cited", ["pb-1"], ticket_key="CTMS-7", success=True)
        usage.record(session, "cited", ["pb-1"], ticket_key="CTMS-8", success=False)
        usage.record(session, "cited", ["pb-1"], ticket_key="CTMS-9")
    first = bullet(playbook, "pb-1")
    assert (first.loads, first.cites, first.cites_success, first.cites_failure) == (1, 3, 1, 1)
    assert first.last_loaded_at == T0
    assert first.last_cited_at == T0 + timedelta(hours=1)
    assert bullet(playbook, "pb-3").loads == 0


def test_an_unknown_id_records_nothing(playbook: Engine) -> None:
    with pytest.raises(BulletNotFound, match="pb-99"), transaction(playbook) as session:
        usage.record(session, "cited", ["pb-1", "pb-99"], ticket_key="CTMS-7")
    with transaction(playbook) as session:
        assert session.scalar(select(func.count()).select_from(UsageEvent)) == 0
    assert bullet(playbook, "pb-1").cites == 0


def test_bad_kind_and_empty_ids_are_refused(playbook: Engine) -> None:
    with transaction(playbook) as session:
        with pytest.raises(InvalidInput, match="loaded, cited"):
            usage.record(session, "viewed", ["pb-1"])
        with pytest.raises(InvalidInput, match="at least one"):
            usage.record(session, "cited", [" "])


def test_an_older_event_does_not_move_last_seen_backwards(playbook: Engine) -> None:
    with transaction(playbook) as session:
        usage.record(session, "loaded", ["pb-1"], ts=T0)
        usage.record(session, "loaded", ["pb-1"], ts=T0 - timedelta(days=5))
    assert bullet(playbook, "pb-1").last_loaded_at == T0


def test_settling_outcomes_is_idempotent_and_can_change_sides(playbook: Engine) -> None:
    with transaction(playbook) as session:
        events = usage.record(session, "cited", ["pb-1", "pb-2"], ticket_key="CTMS-7")
        ids = [event.id for event in events]
    with transaction(playbook) as session:
        assert usage.settle(session, ids, False) == 2
        assert usage.settle(session, ids, False) == 0
    assert (bullet(playbook, "pb-1").cites_success, bullet(playbook, "pb-1").cites_failure) == (
        0,
        1,
    )
    with transaction(playbook) as session:
        assert usage.settle(session, ids, True) == 2
    assert (bullet(playbook, "pb-2").cites_success, bullet(playbook, "pb-2").cites_failure) == (
        1,
        0,
    )
    assert bullet(playbook, "pb-2").cites == 1


def test_counters_agree_with_the_event_log(playbook: Engine) -> None:
    with transaction(playbook) as session:
        usage.record(session, "loaded", ["pb-1", "pb-2", "pb-3"], ticket_key="A-1")
        events = usage.record(session, "cited", ["pb-2"], ticket_key="A-1", success=True)
        usage.record(session, "cited", ["pb-3"], ticket_key="A-2", success=False)
        usage.settle(session, [events[0].id], False)
    with transaction(playbook) as session:
        assert usage.recount(session) == []


def test_recount_repairs_drifted_counters(playbook: Engine) -> None:
    with transaction(playbook) as session:
        usage.record(session, "cited", ["pb-1"], ticket_key="A-1", success=True)
        lifecycle.get(session, "pb-1").cites = 40  # e.g. a hand-edited row
    with transaction(playbook) as session:
        assert usage.recount(session) == ["pb-1"]
    assert bullet(playbook, "pb-1").cites == 1


def test_dedup_keys_make_a_replayed_event_harmless(playbook: Engine) -> None:
    for _ in range(2):
        with transaction(playbook) as session:
            usage.record(session, "cited", ["pb-1"], ticket_key="A-1", dedup_keys=["line-1:pb-1"])
    assert bullet(playbook, "pb-1").cites == 1


def test_ten_threads_citing_one_bullet_leave_exactly_ten_cites(playbook: Engine) -> None:
    barrier = threading.Barrier(10)
    errors: list[BaseException] = []

    def cite(n: int) -> None:
        try:
            barrier.wait()
            with transaction(playbook) as session:
                usage.record(session, "cited", ["pb-1"], ticket_key=f"CTMS-{n}", success=n % 2 == 0)
        except BaseException as error:  # surfaced below; a thread cannot fail the test itself
            errors.append(error)

    threads = [threading.Thread(target=cite, args=(n,)) for n in range(10)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    with transaction(playbook) as session:
        cited = session.scalar(
            select(func.count()).select_from(UsageEvent).where(UsageEvent.bullet_id == "pb-1")
        )
        assert cited == 10
        assert usage.recount(session) == []
    first = bullet(playbook, "pb-1")
    assert (first.cites, first.cites_success, first.cites_failure) == (10, 5, 5)


LESSONS = [
    "Kafka consumers must commit offsets after processing",
    "Redis keys need a TTL or memory grows forever",
    "Postgres advisory locks serialise the scheduler",
    "Nginx buffers large uploads to disk by default",
    "Celery retries need jitter to avoid thundering herds",
    "Stripe webhooks arrive out of order sometimes",
    "Terraform state must be locked in CI",
    "Helm charts pin image digests, not tags",
]


def test_concurrent_adds_get_distinct_ids(engine: Engine) -> None:
    barrier = threading.Barrier(8)
    ids: list[str] = []
    errors: list[BaseException] = []

    def add(n: int) -> None:
        try:
            barrier.wait()
            with transaction(engine) as session:
                result = lifecycle.add(session, LESSONS[n], learned_from="A-1", actor="t")
                ids.append(result.bullet.id)
        except BaseException as error:
            errors.append(error)

    threads = [threading.Thread(target=add, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert sorted(ids, key=lifecycle.sort_key) == [f"pb-{n}" for n in range(1, 9)], ids


def test_record_once_counts_a_lesson_once_per_ticket_and_kind(playbook: Engine) -> None:
    with transaction(playbook) as session:
        first = usage.record_once(session, "cited", ["pb-1", "pb-2", "pb-1"], ticket_key="A-1")
        again = usage.record_once(session, "cited", ["pb-1"], ticket_key=" A-1 ")
        loaded = usage.record_once(session, "loaded", ["pb-1"], ticket_key="A-1")
        elsewhere = usage.record_once(session, "cited", ["pb-1"], ticket_key="A-2")
    assert [e.bullet_id for e in first] == ["pb-1", "pb-2"]
    assert (again, len(loaded), len(elsewhere)) == ([], 1, 1)
    assert (bullet(playbook, "pb-1").cites, bullet(playbook, "pb-1").loads) == (2, 1)


def test_a_repeated_cite_settles_the_outcome_of_the_first(playbook: Engine) -> None:
    with transaction(playbook) as session:
        usage.record_once(session, "cited", ["pb-1"], ticket_key="A-1")
    with transaction(playbook) as session:
        usage.record_once(session, "cited", ["pb-1"], ticket_key="A-1", success=False)
    with transaction(playbook) as session:
        usage.record_once(session, "cited", ["pb-1"], ticket_key="A-1", success=False)
    first = bullet(playbook, "pb-1")
    assert (first.cites, first.cites_success, first.cites_failure) == (1, 0, 1)
    with transaction(playbook) as session:
        assert usage.recount(session) == []


@pytest.mark.parametrize("ticket", ["", "   ", None])
def test_record_once_refuses_work_without_a_ticket(playbook: Engine, ticket) -> None:
    with pytest.raises(InvalidInput, match="ticketId"), transaction(playbook) as session:
        usage.record_once(session, "cited", ["pb-1"], ticket_key=ticket)
    assert bullet(playbook, "pb-1").cites == 0


@pytest.mark.parametrize(
    "data",
    [
        {"event": "cited", "lessonIds": ["pb-1"]},
        {"event": "cited", "lessonIds": ["pb-1"], "ticketId": ""},
        {"event": "loaded", "lessonIds": ["pb-1"], "ticketId": " \t"},
        {"event": "loaded", "lessonIds": ["pb-1"], "ticket": None},
    ],
)
def test_an_agent_event_without_a_ticket_is_refused_naming_ticket_id(data) -> None:
    with pytest.raises(InvalidInput) as refused:
        usage.parse_agent_event(data)
    assert str(refused.value).startswith("ticketId is required")
    assert "\n" not in str(refused.value)


def test_an_agent_event_counts_once_per_ticket_by_api_import_or_both(playbook: Engine) -> None:
    event = usage.parse_agent_event(
        {"event": "cited", "lessonIds": ["pb-1"], "ticketId": "A-1", "ts": "2026-11-01T10:00:00Z"}
    )
    later = usage.parse_agent_event(
        {"event": "cited", "lessonIds": ["pb-1"], "ticket": "A-1", "phase": "review"}
    )
    with transaction(playbook) as session:
        assert len(usage.record_agent_event(session, event, "line-1")) == 1
        assert usage.record_agent_event(session, event, "line-2") == []
        assert usage.record_agent_event(session, later) == []
    with transaction(playbook) as session:
        [recorded] = usage.events_for(session, "pb-1")
        assert recorded.ts == datetime(2026, 11, 1, 10, 0, tzinfo=UTC)

"""The holdout at the doors: the setting and the CLI's periods, enrollment, exposures."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from sqlalchemy import Engine, select

from playbook import clock, db
from playbook.experiment import assignment, holdout
from playbook.lessons import lifecycle
from playbook.models import ExperimentExposure
from playbook.outcomes import seen_tickets

T0 = datetime(2025, 3, 1, 9, 0, tzinfo=UTC)
ON = holdout.Config(percent=20, salt="unit-salt")


def _periods(engine: Engine) -> list[tuple[int, str, str | None]]:
    with db.transaction(engine) as session:
        return [(p.percent, p.started_by, p.stopped_by) for p in assignment.periods(session)]


def test_the_setting_starts_changes_and_stops_its_own_periods(engine: Engine) -> None:
    with db.transaction(engine) as session:
        assert holdout.percent_in_force(session, holdout.OFF, T0) == 0
        assert holdout.percent_in_force(session, ON, T0) == 20
        assert holdout.percent_in_force(session, ON, T0 + timedelta(hours=1)) == 20
        assert holdout.percent_in_force(session, holdout.Config(10, "s"), T0) == 10
        assert holdout.percent_in_force(session, holdout.OFF, T0) == 0
    assert _periods(engine) == [(20, "setting", "setting"), (10, "setting", "setting")]


def test_a_person_s_start_and_stop_win_over_the_setting(engine: Engine) -> None:
    with db.transaction(engine) as session:
        assignment.start(session, 5, T0, "cli:ann")
        # The setting says 20 (or off): the period someone started stands.
        assert holdout.percent_in_force(session, ON, T0) == 5
        assert holdout.percent_in_force(session, holdout.OFF, T0) == 5
        assignment.stop(session, T0 + timedelta(days=1), "cli:ann")
        # Stopped by a person: it stays stopped even though the setting is on.
        assert holdout.percent_in_force(session, ON, T0 + timedelta(days=2)) == 0
    assert _periods(engine) == [(5, "cli:ann", "cli:ann")]


def test_enroll_stores_once_and_keeps_tickets_seen_before_outside(engine: Engine) -> None:
    with db.transaction(engine) as session:
        seen_tickets.saw(session, "OLD-1", "jira")  # stamped with the real clock
    later = clock.now() + timedelta(days=1)
    with db.transaction(engine) as session:
        # Seen while the experiment was off (before its first period): outside for good.
        assert holdout.enroll(session, ON, "OLD-1", now=later) is None
        placed = holdout.enroll(session, ON, "NEW-1", now=later, created_at=T0)
        assert placed is not None and placed.percent == 20
        again = holdout.enroll(session, holdout.Config(40, "unit-salt"), "new-1", now=T0)
        assert again == placed  # later percentages, spellings and deliveries change nothing
        assert holdout.arm_for(session, ON, "NEW-1", T0) == placed.arm
        assert holdout.arm_for(session, ON, "OLD-1", T0) is None
        assert holdout.arm_for(session, ON, None, T0) is None


def test_arm_for_a_ticket_never_delivered_is_computed_not_stored(engine: Engine) -> None:
    with db.transaction(engine) as session:
        computed = holdout.arm_for(session, ON, "LATER-7", T0)
        assert computed == assignment.arm(b"unit-salt", "LATER-7", 20)
        assert assignment.assigned(session, "LATER-7") is None


def test_exposures_are_kept_once_per_ticket_and_lesson_with_their_first_rank(
    engine: Engine,
) -> None:
    with db.transaction(engine) as session:
        one = lifecycle.add(
            session, "Lesson one about retries", learned_from="X-1", actor="t"
        ).bullet.id
        two = lifecycle.add(
            session, "Lesson two about locks", learned_from="X-2", actor="t"
        ).bullet.id
    with db.transaction(engine) as session:
        new = holdout.record_exposures(
            session, "Acme/API#7", "held_out", [(one, 1)], query_id="q1", consumer="c", now=T0
        )
        again = holdout.record_exposures(
            session,
            "acme/api#7",
            "held_out",
            [(two, 1), (one, 2), ("pb-999", 3)],
            query_id="q2",
            consumer="c",
            now=T0,
        )
        assert (new, again) == (1, 1)  # the removed pb-999 is left out
    with db.transaction(engine) as session:
        rows = session.execute(
            select(ExperimentExposure.bullet_id, ExperimentExposure.rank).order_by(
                ExperimentExposure.id
            )
        ).all()
        assert [tuple(r) for r in rows] == [(one, 1), (two, 1)]

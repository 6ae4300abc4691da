"""The holdout's report against hand-computed cases: arms, window, lessons' effects, verdicts."""

from __future__ import annotations

import json
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import Engine
from statsmodels.stats.proportion import confint_proportions_2indep, proportion_confint

from playbook import db
from playbook.experiment import assignment, outcomes, report
from playbook.models import Bullet, ExperimentAssignment, ExperimentExposure
from playbook.outcomes import tracking
from playbook.outcomes.tracking import PullRequestState

T0 = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)
HOUR = timedelta(hours=1)
# The seeded playbook's lessons: pb-1, pb-2 global, pb-3 of acme/api, pb-4 of other/web.
GLOBAL_LESSON, OTHER_GLOBAL, ACME_LESSON, WEB_LESSON = "pb-1", "pb-2", "pb-3", "pb-4"


def _tickets(
    engine: Engine,
    prefix: str,
    arm: str,
    outcomes_: Iterable[str | None],
    *,
    at: datetime = T0,
    percent: int = 25,
    hours: Iterable[float] = (),
    rounds: int = 0,
    lessons: Iterable[str] = (),
) -> list[str]:
    """Experiment tickets PREFIX-1.. in ``arm`` with these outcomes, assigned at ``at``;
    merged ones merge after ``hours`` (in order), each has ``rounds`` review rounds, and each
    was shown (or held out from) ``lessons``."""
    keys = []
    merge_hours = iter(hours)
    lessons = list(lessons)
    with db.transaction(engine) as session:
        for n, outcome in enumerate(outcomes_, 1):
            key = f"{prefix}-{n}"
            merged_at = None
            if outcome == "merged":
                merged_at = T0 + next(merge_hours, 1.0) * HOUR
            session.add(
                ExperimentAssignment(
                    ticket_key=key,
                    arm=arm,
                    percent=percent,
                    assigned_at=at,
                    ticket_ref=key,
                    created_at=T0,
                    outcome=outcome,
                    merged_at=merged_at,
                    review_rounds=rounds,
                )
            )
            for rank, bullet_id in enumerate(lessons, 1):
                session.add(
                    ExperimentExposure(
                        ticket_key=key, bullet_id=bullet_id, arm=arm, rank=rank, at=at
                    )
                )
            keys.append(key)
    return keys


def _lesson_sides(
    engine: Engine,
    bullet_id: str,
    prefix: str,
    shown: tuple[int, int],
    held_out: tuple[int, int],
) -> None:
    """A lesson shown on shown[0] tickets with an outcome, shown[1] of them merged; and
    held out from held_out[0] tickets, held_out[1] merged."""
    for arm, (total, merged) in (("shown", shown), ("held_out", held_out)):
        _tickets(
            engine,
            f"{prefix}{arm.upper().replace('_', '')}",
            arm,
            ["merged"] * merged + ["closed"] * (total - merged),
            lessons=[bullet_id],
        )


def _build(engine: Engine, **kwargs) -> dict:
    with db.transaction(engine) as session:
        built = report.build(session, **kwargs)
    # Everything JSON-ready, as the CLI and the API print it.
    return json.loads(json.dumps(built))


def test_the_arms_against_a_hand_computed_case(engine: Engine) -> None:
    # Shown: 30 tickets; 25 with an outcome (18 merged, 7 closed), 3 open, 2 without a PR.
    _tickets(
        engine,
        "SHOWN",
        "shown",
        ["merged"] * 18 + ["closed"] * 7 + ["open"] * 3 + [None] * 2,
        hours=range(1, 19),
    )
    # Review rounds count on tickets with an outcome only: open ones requesting changes
    # don't move the mean.
    with db.transaction(engine) as session:
        for n in range(1, 6):
            session.get(ExperimentAssignment, f"SHOWN-{n}").review_rounds = 2
        for n in (26, 27, 28):
            session.get(ExperimentAssignment, f"SHOWN-{n}").review_rounds = 7
    # Held out: 10 tickets; 8 with an outcome (4 merged after 10, 20, 30, 40 h), 2 open.
    _tickets(
        engine,
        "HELD",
        "held_out",
        ["merged"] * 4 + ["closed"] * 4 + ["open"] * 2,
        hours=(10, 20, 30, 40),
        rounds=1,
    )
    built = _build(engine)
    shown, held_out = built["arms"]["shown"], built["arms"]["held_out"]
    assert (shown["tickets"], shown["with_outcome"], shown["merged"]) == (30, 25, 18)
    assert (held_out["tickets"], held_out["with_outcome"], held_out["merged"]) == (10, 8, 4)
    assert shown["merge_rate"] == pytest.approx(0.72)
    assert held_out["merge_rate"] == pytest.approx(0.5)
    # Wilson by hand: (p + z²/2n ± z·sqrt(p(1-p)/n + z²/4n²)) / (1 + z²/n).
    assert shown["merge_rate_ci"] == pytest.approx([0.5242, 0.8572], abs=1e-4)
    assert held_out["merge_rate_ci"] == pytest.approx([0.2152, 0.7848], abs=1e-4)
    assert shown["merge_rate_ci"] == pytest.approx(
        list(proportion_confint(18, 25, method="wilson"))
    )
    assert built["difference"]["merge_rate"] == pytest.approx(0.22)
    assert built["difference"]["ci"] == pytest.approx(
        list(confint_proportions_2indep(18, 25, 4, 8, method="newcomb", compare="diff"))
    )
    assert "22 points more often" in built["verdict"]
    assert "not conclusive yet" in built["verdict"]
    # Medians of 1..18 h and of 10, 20, 30, 40 h; the mean of 5 x 2 rounds over 25 tickets.
    assert shown["median_hours_to_merge"] == pytest.approx(9.5)
    assert held_out["median_hours_to_merge"] == pytest.approx(25.0)
    low, high = shown["median_hours_to_merge_ci"]
    assert 1 <= low <= 9.5 <= high <= 18
    assert shown["mean_review_rounds"] == pytest.approx(0.4)
    assert held_out["mean_review_rounds"] == pytest.approx(1.0)
    # 10 of 40 held out at 25% each: exactly the split configured.
    assert built["srm"]["expected_held_out_share"] == pytest.approx(0.25)
    assert built["srm"]["observed_held_out_share"] == pytest.approx(0.25)
    assert built["srm"]["mismatch"] is False
    assert [n["points"] for n in built["needed"]] == [5, 10]
    assert built["window"] == {"since": None, "until": None}
    assert built["lessons"] == []
    assert built["min_tickets"] == 20


def test_an_empty_experiment_reports_no_rates_and_no_mismatch(engine: Engine) -> None:
    built = _build(engine)
    assert built["arms"]["shown"]["merge_rate"] is None
    assert built["arms"]["shown"]["merge_rate_ci"] is None
    assert built["difference"] == {"merge_rate": None, "ci": None}
    assert built["srm"]["mismatch"] is False
    assert built["srm"]["expected_held_out_share"] is None
    assert built["experiment"] == {"running": None, "periods": []}


def test_the_running_period_and_the_periods_are_reported(engine: Engine) -> None:
    with db.transaction(engine) as session:
        assignment.start(session, 10, T0, "alice")
        assignment.start(session, 20, T0 + HOUR, "bob")
    built = _build(engine)
    assert built["experiment"]["running"] == {
        "percent": 20,
        "started_at": (T0 + HOUR).isoformat(),
        "started_by": "bob",
    }
    periods = built["experiment"]["periods"]
    assert [(p["percent"], p["stopped_by"]) for p in periods] == [(10, "bob"), (20, None)]
    assert periods[0]["stopped_at"] == (T0 + HOUR).isoformat()
    # With no ticket yet, the split expected is the running period's.
    assert built["srm"]["expected_held_out_share"] == pytest.approx(0.2)


def test_the_window_counts_tickets_assigned_from_since_until_before_until(engine: Engine) -> None:
    _tickets(engine, "EARLY", "shown", ["merged"], at=T0 - 24 * HOUR)
    _tickets(engine, "START", "shown", ["closed", "merged"], at=T0)
    _tickets(engine, "LATE", "held_out", ["merged"], at=T0 + 24 * HOUR)
    built = _build(engine, since=T0, until=T0 + 24 * HOUR)
    assert built["arms"]["shown"]["tickets"] == 2
    assert built["arms"]["held_out"]["tickets"] == 0
    assert built["window"] == {"since": T0.isoformat(), "until": (T0 + 24 * HOUR).isoformat()}
    assert _build(engine, since=T0)["arms"]["held_out"]["tickets"] == 1
    assert _build(engine, until=T0)["arms"]["shown"]["tickets"] == 1


def test_a_sample_ratio_mismatch_is_reported_first(engine: Engine) -> None:
    # 10% configured, half of the tickets held out: the assignment or its logging is broken.
    _tickets(engine, "S", "shown", ["merged"] * 100, percent=10)
    _tickets(engine, "H", "held_out", ["merged"] * 100, percent=10)
    built = _build(engine)
    assert built["srm"]["mismatch"] is True
    assert built["verdict"].startswith("Sample ratio mismatch")


def test_a_ticket_closed_then_merged_counts_as_merged_in_the_report(engine: Engine) -> None:
    _tickets(engine, "PB", "shown", [None])
    for number, state, at in ((1, "closed", T0 + HOUR), (2, "merged", T0 + 3 * HOUR)):
        seen = PullRequestState(
            key=f"acme/api#{number}",
            repo="acme/api",
            number=number,
            title="PB-1",
            head_ref="",
            url=None,
            state=state,
            updated_at=at,
            closed_at=at,
            merged_at=at if state == "merged" else None,
        )
        with db.transaction(engine) as session:
            tracking.observe(session, seen)
            tracking.link(session, seen.key, [("PB-1", "jira")])
            outcomes.refresh(session, ["PB-1"])
    shown = _build(engine)["arms"]["shown"]
    assert (shown["tickets"], shown["with_outcome"], shown["merged"]) == (1, 1, 1)
    assert shown["merge_rate"] == 1.0
    with db.transaction(engine) as session:
        assert session.get(ExperimentAssignment, "PB-1").closed_unmerged is True


def test_not_enough_data_until_both_sides_reach_the_minimum(seeded: Engine) -> None:
    # 19 tickets with an outcome held out: one short of the default 20.
    _lesson_sides(seeded, GLOBAL_LESSON, "A", shown=(40, 5), held_out=(19, 18))
    with db.transaction(seeded) as session:
        effect = report.lesson_effect(session, GLOBAL_LESSON)
        lower = report.lesson_effect(session, GLOBAL_LESSON, min_tickets=19)
        nothing = report.lesson_effect(session, OTHER_GLOBAL)
    assert effect["verdict"] == "not enough data"
    assert effect["enough_data"] is False
    assert effect["min_tickets"] == 20
    assert effect["shown"] == {"tickets": 40, "with_outcome": 40, "merged": 5}
    assert effect["held_out"] == {"tickets": 19, "with_outcome": 19, "merged": 18}
    # The numbers are there; only the verdict waits.
    assert effect["difference"] == pytest.approx(5 / 40 - 18 / 19)
    assert (lower["verdict"], lower["enough_data"]) == ("measured harmful", True)
    assert nothing["verdict"] == "not enough data"
    assert nothing["shown"] == {"tickets": 0, "with_outcome": 0, "merged": 0}
    assert _build(seeded)["lessons"] == []
    assert [x["id"] for x in _build(seeded, min_tickets=19)["lessons"]] == [GLOBAL_LESSON]


def test_open_tickets_are_tickets_of_a_lesson_but_not_outcomes(seeded: Engine) -> None:
    _tickets(seeded, "S", "shown", ["merged", "open", None], lessons=[GLOBAL_LESSON])
    _tickets(seeded, "H", "held_out", ["closed", "open"], lessons=[GLOBAL_LESSON])
    with db.transaction(seeded) as session:
        effect = report.lesson_effect(session, GLOBAL_LESSON, min_tickets=1)
    assert effect["shown"] == {"tickets": 3, "with_outcome": 1, "merged": 1}
    assert effect["held_out"] == {"tickets": 2, "with_outcome": 1, "merged": 0}


def test_exposures_of_tickets_outside_the_experiment_are_not_counted(seeded: Engine) -> None:
    _tickets(seeded, "S", "shown", ["merged"], lessons=[GLOBAL_LESSON])
    with db.transaction(seeded) as session:
        # An agent's search for a ticket the experiment never enrolled.
        session.add(
            ExperimentExposure(ticket_key="GHOST-1", bullet_id=GLOBAL_LESSON, arm="shown", at=T0)
        )
    with db.transaction(seeded) as session:
        effect = report.lesson_effect(session, GLOBAL_LESSON, min_tickets=1)
    assert effect["shown"]["tickets"] == 1


def test_lessons_most_harmful_first_and_the_measured_lists(seeded: Engine) -> None:
    # Harmful, worst: 3 of 20 merged shown, 11 of 12 held out.
    _lesson_sides(seeded, GLOBAL_LESSON, "A", shown=(20, 3), held_out=(12, 11))
    # Harmful, milder: 8 of 20 against 11 of 12.
    _lesson_sides(seeded, ACME_LESSON, "B", shown=(20, 8), held_out=(12, 11))
    # Helpful: 19 of 20 against 2 of 12.
    _lesson_sides(seeded, OTHER_GLOBAL, "C", shown=(20, 19), held_out=(12, 2))
    # No clear effect: 10 of 20 against 6 of 12.
    _lesson_sides(seeded, WEB_LESSON, "D", shown=(20, 10), held_out=(12, 6))
    built = _build(seeded, min_tickets=10)
    ids = [lesson["id"] for lesson in built["lessons"]]
    assert ids == [GLOBAL_LESSON, ACME_LESSON, WEB_LESSON, OTHER_GLOBAL]
    highs = [lesson["ci"][1] for lesson in built["lessons"]]
    assert highs == sorted(highs)
    assert [lesson["verdict"] for lesson in built["lessons"]] == [
        "measured harmful",
        "measured harmful",
        "no clear effect",
        "measured helpful",
    ]
    first = built["lessons"][0]
    assert first["shown"] == {"tickets": 20, "with_outcome": 20, "merged": 3}
    assert first["held_out"] == {"tickets": 12, "with_outcome": 12, "merged": 11}
    assert first["ci"][1] < 0
    assert first["text"] == "Retry webhooks with an idempotency key"
    assert first["scope"] == "global"
    assert built["measured_harmful"] == [GLOBAL_LESSON, ACME_LESSON]
    assert built["measured_helpful"] == [OTHER_GLOBAL]
    with db.transaction(seeded) as session:
        measured = report.measured(session, min_tickets=10)
        strict = report.measured(session, min_tickets=13)
    assert measured == report.Measured((GLOBAL_LESSON, ACME_LESSON), frozenset({OTHER_GLOBAL}))
    # Above the held-out side's 12 tickets, nothing is measured.
    assert strict == report.Measured((), frozenset())
    # A caller bound to other/web sees its scope's lessons and the global ones only.
    scoped = _build(seeded, min_tickets=10, scopes={"global", "other/web"})
    assert [x["id"] for x in scoped["lessons"]] == [GLOBAL_LESSON, WEB_LESSON, OTHER_GLOBAL]
    assert scoped["measured_harmful"] == [GLOBAL_LESSON]
    # The arms count every ticket whatever the scope.
    assert scoped["arms"] == built["arms"]


def _more_lessons(engine: Engine, count: int) -> list[str]:
    """``count`` more global lessons, aa-1.., with nothing else about them."""
    ids = [f"aa-{n}" for n in range(1, count + 1)]
    with db.transaction(engine) as session:
        for n, bullet_id in enumerate(ids, 1):
            text = f"Lesson number {n} of an experiment with nothing planted"
            session.add(Bullet(id=bullet_id, text=text, created_at=T0, updated_at=T0))
    return ids


def test_a_lesson_below_zero_by_chance_among_many_is_not_measured_harmful(
    seeded: Engine,
) -> None:
    # An A/A world: 12 lessons with no effect, all shown on (or held out from) the same
    # tickets, 20 of 40 merged on each side.
    nulls = _more_lessons(seeded, 12)
    for arm, prefix in (("shown", "NS"), ("held_out", "NH")):
        _tickets(seeded, prefix, arm, ["merged"] * 20 + ["closed"] * 20, lessons=nulls)
    # One lesson whose interval lies below zero by chance (18 of 50 against 30 of 50; p =
    # 0.017 alone), and one clearly harmful (5 of 30 against 25 of 30).
    _lesson_sides(seeded, GLOBAL_LESSON, "C", shown=(50, 18), held_out=(50, 30))
    _lesson_sides(seeded, OTHER_GLOBAL, "H", shown=(30, 5), held_out=(30, 25))
    built = _build(seeded)
    lessons = {lesson["id"]: lesson for lesson in built["lessons"]}
    assert len(lessons) == 14
    by_chance = lessons[GLOBAL_LESSON]
    assert by_chance["ci"][1] < 0 and by_chance["p_value"] < 0.05
    assert by_chance["compared"] == 14 and by_chance["adjusted_p_value"] > 0.05
    assert by_chance["verdict"] == (
        "no clear effect: below zero, but not after allowing for the 14 lessons compared"
    )
    assert lessons[OTHER_GLOBAL]["verdict"] == "measured harmful"
    assert {lessons[i]["verdict"] for i in nulls} == {"no clear effect"}
    assert built["measured_harmful"] == [OTHER_GLOBAL]
    assert built["measured_helpful"] == []
    with db.transaction(seeded) as session:
        measured = report.measured(session)
        one_by_one = {i: report.lesson_effect(session, i) for i in lessons}
    assert measured == report.Measured((OTHER_GLOBAL,), frozenset())
    # Each lesson's own answer (show, the API, the page) is the report's, verdict and all.
    for bullet_id, effect in one_by_one.items():
        listed = {k: v for k, v in lessons[bullet_id].items() if k not in ("id", "text", "scope")}
        assert effect == {**listed, "enough_data": True, "min_tickets": 20}


def test_the_report_measured_and_each_lesson_agree_on_every_verdict(seeded: Engine) -> None:
    _lesson_sides(seeded, GLOBAL_LESSON, "A", shown=(20, 3), held_out=(12, 11))
    _lesson_sides(seeded, ACME_LESSON, "B", shown=(20, 8), held_out=(12, 11))
    _lesson_sides(seeded, OTHER_GLOBAL, "C", shown=(20, 19), held_out=(12, 2))
    _lesson_sides(seeded, WEB_LESSON, "D", shown=(20, 10), held_out=(12, 6))
    for minimum in (10, 12, 13):
        built = _build(seeded, min_tickets=minimum)
        with db.transaction(seeded) as session:
            measured = report.measured(session, min_tickets=minimum)
            effects = {
                i: report.lesson_effect(session, i, min_tickets=minimum)
                for i in (GLOBAL_LESSON, ACME_LESSON, OTHER_GLOBAL, WEB_LESSON)
            }
        verdicts = {lesson["id"]: lesson["verdict"] for lesson in built["lessons"]}
        for bullet_id, effect in effects.items():
            assert effect["verdict"] == verdicts.get(bullet_id, "not enough data")
            assert effect["compared"] == (len(verdicts) if bullet_id in verdicts else None)
        harmful = [i for i, v in verdicts.items() if v == "measured harmful"]
        helpful = {i for i, v in verdicts.items() if v == "measured helpful"}
        assert measured == report.Measured(tuple(harmful), frozenset(helpful))
        assert built["measured_harmful"] == harmful
        assert set(built["measured_helpful"]) == helpful
    # A caller bound to scopes sees fewer lessons, each with the verdict of the whole family.
    scoped = _build(seeded, min_tickets=10, scopes={"global"})
    assert {lesson["compared"] for lesson in scoped["lessons"]} == {4}

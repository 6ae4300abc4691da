"""`playbook-bot experiment` (the report, start, stop) and the measured effect in `show`."""

from __future__ import annotations

import json
from typing import Any

import pytest
from sqlalchemy import Engine

from playbook.db import transaction
from playbook.experiment import assignment, statistics
from tests import holdout_world
from tests.holdout_world import FIRST_DAY, HARMFUL, STARTED


@pytest.fixture
def world(seeded: Engine, monkeypatch: pytest.MonkeyPatch) -> Engine:
    """The hand-computed experiment, read with a minimum of 5 tickets per side."""
    monkeypatch.setenv("PLAYBOOK_EFFECT_MIN_TICKETS", str(holdout_world.MIN_TICKETS))
    holdout_world.build(seeded)
    return seeded


def report(cli: Any, *args: str) -> dict[str, Any]:
    result = cli("experiment", "--json", *args)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def one_error_line(result: Any) -> str:
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    return lines[0]


def test_the_json_report_has_both_arms_the_difference_and_the_harmful_lesson(
    cli: Any, world: Engine
) -> None:
    built = report(cli)
    shown, held_out = built["arms"]["shown"], built["arms"]["held_out"]
    assert (shown["tickets"], shown["with_outcome"], shown["merged"]) == (30, 29, 20)
    assert (held_out["tickets"], held_out["with_outcome"], held_out["merged"]) == (10, 10, 9)
    assert shown["merge_rate"] == pytest.approx(20 / 29)
    assert shown["merge_rate_ci"] == pytest.approx(list(statistics.wilson_interval(20, 29)))
    assert held_out["merge_rate"] == pytest.approx(0.9)
    comparison = statistics.newcombe_difference(20, 29, 9, 10)
    assert built["difference"]["merge_rate"] == pytest.approx(20 / 29 - 0.9)
    assert built["difference"]["ci"] == pytest.approx([comparison.low, comparison.high])
    assert built["verdict"].startswith("Tickets shown lessons merged 21 points less often")
    assert built["srm"]["mismatch"] is False
    assert built["measured_harmful"] == [HARMFUL]
    assert [lesson["id"] for lesson in built["lessons"]] == [HARMFUL]
    assert built["min_tickets"] == holdout_world.MIN_TICKETS
    running = built["experiment"]["running"]
    assert running["percent"] == 20
    assert running["started_by"] == "cli:tester"


def test_the_text_report_says_the_same_in_sentences(cli: Any, world: Engine) -> None:
    result = cli("experiment")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0].startswith("experiment: running, 20% of new tickets held out, since 2026-03-01")
    text = result.stdout
    assert "shown     30 tickets, 29 with an outcome, 20 merged; merge rate 69%" in text
    assert "held out  10 tickets, 10 with an outcome, 9 merged; merge rate 90%" in text
    assert "difference (shown minus held out): -21 points (95% CI" in text
    assert "Tickets shown lessons merged 21 points less often" in text
    assert "for 5 points" in text
    assert "for 10 points" in text
    harmful = lines.index("measured harmful (prune --apply deprecates them):")
    assert lines[harmful + 1].startswith(f"  {HARMFUL} -80 points (95% CI -92 to -37): Pin")
    heading = "lessons with enough data (5 tickets with an outcome each side), most harmful first:"
    listed = lines.index(heading)
    assert lines[listed + 1].startswith(f"  {HARMFUL} measured harmful, -80 points (95% CI")
    assert "held out from 10 tickets, 10 with an outcome, 9 merged" in lines[listed + 1]
    assert "WARNING" not in text


def test_a_sample_ratio_mismatch_is_the_first_line(cli: Any, seeded: Engine) -> None:
    with transaction(seeded) as session:
        assignment.start(session, 10, STARTED, "cli:tester")
        # Half and half at a configured 10%: the split or its logging is broken.
        for n in range(60):
            arm = "held_out" if n % 2 else "shown"
            holdout_world.ticket(session, f"M-{n}", arm, "merged", at=FIRST_DAY, percent=10)
    result = cli("experiment")
    assert result.exit_code == 0, result.output
    first = result.stdout.splitlines()[0]
    assert first.startswith("WARNING: Sample ratio mismatch: 30 tickets shown and 30 held out")
    assert result.stdout.count("Sample ratio mismatch") == 1  # not again in the verdict
    assert report(cli)["srm"]["mismatch"] is True


def test_the_window_is_over_when_tickets_were_assigned(cli: Any, world: Engine) -> None:
    first_day = report(cli, "--until", "2026-03-01")["arms"]
    assert (first_day["shown"]["tickets"], first_day["held_out"]["tickets"]) == (10, 10)
    later = report(cli, "--since", "2026-03-02")["arms"]
    assert (later["shown"]["tickets"], later["held_out"]["tickets"]) == (20, 0)
    exact = report(cli, "--since", "2026-03-05T11:00:00+00:00", "--until", "2026-03-05T13:00Z")
    assert exact["arms"]["shown"]["tickets"] == 20
    text = cli("experiment", "--since", "2026-03-02").stdout
    assert "tickets assigned from 2026-03-02 00:00 UTC to now" in text


@pytest.mark.parametrize(
    ("option", "value"),
    [("--since", "2026-02-30"), ("--until", "last tuesday"), ("--since", "")],
)
def test_a_bad_date_is_one_line_naming_the_option(
    cli: Any, engine: Engine, option: str, value: str
) -> None:
    line = one_error_line(cli("experiment", option, value))
    assert line.startswith(f"error: invalid value for '{option}'"), line
    assert "2026-11-17" in line


def test_since_after_until_is_refused(cli: Any, engine: Engine) -> None:
    line = one_error_line(cli("experiment", "--since", "2026-03-05", "--until", "2026-03-01"))
    assert "'--since'" in line


def test_start_and_stop_record_periods_the_report_shows(cli: Any, engine: Engine) -> None:
    assert report(cli)["experiment"]["running"] is None
    assert "never run" in cli("experiment").stdout

    started = cli("experiment", "start", "--percent", "10")
    assert started.exit_code == 0, started.output
    assert started.stdout.startswith("experiment started: from now 10% of new tickets")
    assert "no lessons" in started.stdout
    running = report(cli)["experiment"]["running"]
    assert running["percent"] == 10
    assert running["started_by"] == "tester"  # PLAYBOOK_ACTOR, as every CLI change records

    again = cli("experiment", "start", "--percent", "10")
    assert "nothing changed" in again.stdout
    moved = cli("experiment", "start", "--percent", "25")
    assert "the 10% period ended" in moved.stdout
    assert report(cli)["experiment"]["running"]["percent"] == 25

    stopped = cli("experiment", "stop")
    assert stopped.exit_code == 0, stopped.output
    assert stopped.stdout.startswith("experiment stopped: new tickets get lessons again")
    experiment = report(cli)["experiment"]
    assert experiment["running"] is None
    assert [p["percent"] for p in experiment["periods"]] == [10, 25]
    assert all(p["stopped_at"] for p in experiment["periods"])
    assert "not running" in cli("experiment").stdout
    assert cli("experiment", "stop").stdout.startswith("no experiment was running")
    with transaction(engine) as session:
        assert assignment.running(session) is None
        assert [p.stopped_by for p in assignment.periods(session)] == ["tester", "tester"]


@pytest.mark.parametrize("percent", ["0", "51", "ten"])
def test_start_refuses_a_percent_outside_1_to_50(cli: Any, engine: Engine, percent: str) -> None:
    line = one_error_line(cli("experiment", "start", "--percent", percent))
    assert "'--percent'" in line
    with transaction(engine) as session:
        assert assignment.periods(session) == []


def test_show_has_the_lessons_measured_effect(cli: Any, world: Engine) -> None:
    shown = cli("show", HARMFUL, "--json")
    assert shown.exit_code == 0, shown.output
    effect = json.loads(shown.stdout)["effect"]
    assert effect["shown"] == {"tickets": 10, "with_outcome": 10, "merged": 1}
    assert effect["held_out"] == {"tickets": 10, "with_outcome": 10, "merged": 9}
    assert effect["difference"] == pytest.approx(-0.8)
    assert effect["ci"][1] < 0
    assert effect["verdict"] == "measured harmful"
    text = cli("show", HARMFUL).stdout
    assert "Measured effect: measured harmful, -80 points (95% CI" in text
    assert "shown on 10 tickets, 10 with an outcome, 1 merged" in text

    other = json.loads(cli("show", "pb-1", "--json").stdout)["effect"]
    assert other["verdict"] == "not enough data"
    assert other["held_out"]["tickets"] == 0
    assert "Measured effect: not enough data" in cli("show", "pb-1").stdout

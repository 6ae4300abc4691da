"""`playbook-bot relevance`: each scope's verdicts, fit and off-topic lessons; --refit; --json."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sqlalchemy import Engine

from playbook import db
from playbook.fit.calibration import MIN_LABELS
from playbook.models import FitCalibration
from playbook.search.floor import default_min_relevance
from playbook.search.relevance import shifted
from tests.bot.cli.test_cli_startup import LIBRARIES, imported_by
from tests.playbook.fit.world import NOW, commented, off_topic_world, reply

FLOOR = default_min_relevance()


def test_each_scope_with_verdicts_its_fit_and_its_off_topic_lessons(engine: Engine, cli) -> None:
    off_topic_world(engine)
    result = cli("relevance")
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[:2] == [
        "CTMS: 2 verdicts (0 helpful, 2 not)",
        f"  the packaged model as is: 2 of {MIN_LABELS} verdicts on lessons the bot showed, "
        f"{MIN_LABELS - 2} more to go",
    ]
    assert lines[2] == f"  floor {FLOOR:.3g} (the packaged estimate's)"
    acme = lines.index("acme/api: 17 verdicts (3 helpful, 14 not)")
    assert lines[acme + 3 : acme + 5] == [
        "  often marked off-topic:",
        "    pb-6 -3/+1 by 3 people on 3 tickets: Compress nightly log archives before upload"
        ' (last reason: "about log shipping, not builds")',
    ]
    across = lines.index("across scopes:")
    assert [line.split()[0] for line in lines[across + 2 :]] == ["pb-1", "pb-4", "pb-6"]


def test_one_scope_and_the_floor_it_implies_once_fitted(engine: Engine, cli) -> None:
    with db.transaction(engine) as session:
        session.add(
            FitCalibration(scope="acme/api", labels=90, helpful=2, shift=-0.5, fitted_at=NOW)
        )
    result = cli("relevance", "--scope", "acme/api")
    assert result.exit_code == 0, result.output
    assert result.output.splitlines() == [
        "acme/api: 0 verdicts (0 helpful, 0 not)",
        "  fitted on 0 verdicts: estimates read 1.6x lower in odds (log-odds -0.50)",
        f"  floor {FLOOR:.3g} -> {shifted(FLOOR, 0.5):.3g} of the packaged estimate for acme/api",
    ]


def test_refit_fits_every_scope_with_enough_verdicts(engine: Engine, cli) -> None:
    ids = off_topic_world(engine)
    for n in range(MIN_LABELS):
        commented(engine, f"CTMS-{100 + n}", [(ids[0], 0.02)], target="jira")
        reply(engine, f"CTMS-{100 + n}", ids[0], n % 4 == 0, f"p{n % 5}", target="jira")
    before = json.loads(cli("relevance", "--json").output)
    assert [s["fitted"] for s in before["scopes"]] == [False, False, False]
    result = cli("relevance", "--refit", "--json")
    assert result.exit_code == 0, result.output
    assert result.stderr == "refitted 3 scopes\n"
    answer = json.loads(result.stdout)
    ctms = answer["scopes"][0]
    assert (ctms["scope"], ctms["fitted"], ctms["labels"], ctms["needed"]) == (
        "CTMS",
        True,
        MIN_LABELS + 2,
        0,
    )
    assert ctms["shift"] > 1 and ctms["raw_floor"] < answer["floor"] == FLOOR
    assert [s["fitted"] for s in answer["scopes"][1:]] == [False, False]
    assert set(answer) == {
        "floor",
        "min_labels",
        "max_shift",
        "off_topic_rule",
        "scopes",
        "off_topic",
    }
    assert {o["bullet_id"] for o in answer["off_topic"]} == {"pb-1", "pb-4", "pb-6"}


def test_no_verdicts_yet_says_how_they_come(cli) -> None:
    result = cli("relevance")
    assert result.exit_code == 0
    assert result.output.startswith("no verdicts yet: 👍/👎 on the bot's comments")


@pytest.mark.parametrize("scope", ["", "  ", "a" * 201, "acme/\x1bapi"])
def test_a_bad_scope_is_one_line_naming_the_option(cli, scope: str) -> None:
    result = cli("relevance", "--scope", scope)
    assert result.exit_code == 2
    [line] = result.stderr.splitlines()
    assert line.startswith("error: ") and "'--scope'" in line


@pytest.mark.slow
def test_the_command_imports_no_library_it_does_not_use(tmp_path: Path) -> None:
    loaded = imported_by(["relevance"], tmp_path, (*LIBRARIES, "sqlalchemy"))
    assert loaded == ["sqlalchemy"]

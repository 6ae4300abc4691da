"""`playbook-bot gaps`: the recurring tickets without a lesson, as text and as JSON."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from sqlalchemy import Engine

from tests.gaps_world import CLUSTER, NOW, OTHERS, searched

JIRA = "https://jira.example.com"


@pytest.fixture(autouse=True)
def _jira_url(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JIRA_URL", JIRA)


def test_the_text_report_names_the_gap_its_words_and_linked_tickets(engine: Engine, cli) -> None:
    github = [(f"acme/shop#{n}", title, body) for n, (_, title, body) in enumerate(CLUSTER, 7)]
    searched(engine, OTHERS + CLUSTER[:2] + github[:1])
    result = cli("gaps")
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0] == (
        "1 gap (groups of at least 3 similar tickets) among 13 tickets without a lesson, "
        "of 13 seen in the last 7 days"
    )
    assert lines[2].startswith("3 tickets, 2026-11-20 to 2026-11-21 (3 a week): ")
    assert "kafka" in lines[2] and "rebalance" in lines[2]
    assert lines[3] == (f"  CTMS-101  {CLUSTER[0][1]}  {JIRA}/browse/CTMS-101")
    assert lines[5] == f"  acme/shop#7  {CLUSTER[0][1]}  https://github.com/acme/shop/issues/7"


def test_json_shape(engine: Engine, cli) -> None:
    searched(engine, OTHERS + CLUSTER)
    answer = json.loads(cli("gaps", "--json").output)
    assert set(answer) == {
        "days",
        "min",
        "since",
        "threshold",
        "tickets",
        "without_lessons",
        "capped",
        "gaps",
    }
    assert (answer["days"], answer["min"], answer["capped"]) == (7, 3, False)
    [gap] = answer["gaps"]
    assert set(gap) == {"size", "words", "first_seen", "last_seen", "per_week", "tickets"}
    assert gap["size"] == 4 and "consumer" in gap["words"]
    assert gap["tickets"][0] == {
        "key": "CTMS-101",
        "title": CLUSTER[0][1],
        "url": f"{JIRA}/browse/CTMS-101",
        "first_seen": "2026-11-20T22:00:00+00:00",
    }


def test_days_and_min_options(engine: Engine, cli) -> None:
    searched(engine, CLUSTER[:2], at=NOW - timedelta(days=10))
    searched(engine, OTHERS + CLUSTER[2:])
    assert json.loads(cli("gaps", "--json").output)["gaps"] == []
    assert len(json.loads(cli("gaps", "--json", "--min", "2").output)["gaps"]) == 1
    [gap] = json.loads(cli("gaps", "--json", "--days", "14", "--min", "4").output)["gaps"]
    assert gap["size"] == 4


@pytest.mark.parametrize(
    ("args", "named"),
    [(("--days", "0"), "'--days'"), (("--min", "1"), "'--min'"), (("--days", "x"), "'--days'")],
)
def test_bad_values_are_one_line_naming_the_option(cli, args: tuple[str, ...], named: str) -> None:
    result = cli("gaps", *args)
    assert result.exit_code == 2
    [line] = result.stderr.splitlines()
    assert line.startswith("error: ") and named in line


def test_a_title_cannot_drive_the_terminal(engine: Engine, cli) -> None:
    hostile = [
        (key, f"{title}\x1b[2J\u202e\nFAKE-1  forged row", body) for key, title, body in CLUSTER
    ]
    searched(engine, OTHERS + hostile)
    output = cli("gaps").output
    assert "\x1b" not in output and "\u202e" not in output
    ticket_lines = [line for line in output.splitlines() if line.startswith("  ")]
    assert [line.split()[0] for line in ticket_lines] == [key for key, _, _ in CLUSTER]
    # The title stays on its ticket's line, its escape sequence inert.
    assert all(line.split("  ")[2].endswith("[2J FAKE-1 forged row") for line in ticket_lines)

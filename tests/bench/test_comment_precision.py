"""The comment-precision bench: the bot's floor replayed; floor 0 is today's always-five."""

from __future__ import annotations

import contextlib
import io
import json
import sys
from pathlib import Path
from typing import Any

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))

import comment_precision  # noqa: E402
from comment_precision import Searched, Shown  # noqa: E402

from playbook.search import retrieval  # noqa: E402
from playbook.search.floor import Floor, default_min_relevance  # noqa: E402

SHARES = ("commented", "comment_precision", "lesson_precision", "kept")
SAME_AS_TODAY = (*SHARES, "comments", "shown", "relevant_shown", "lessons_per_comment")


@pytest.fixture(scope="module")
def report() -> dict[str, Any]:
    """The bench on 150 generated issues (four Jira links among them), as --json prints it."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        returned = comment_precision.main(["--generated", "--limit", "150", "--json"])
    printed = json.loads(out.getvalue())  # one document, nothing else on stdout
    assert printed == json.loads(json.dumps(returned))
    return printed


def test_the_json_document_holds_the_curve_the_goals_the_calibration_and_the_times(
    report: dict[str, Any],
) -> None:
    printed = report
    assert printed["command"] == "python bench/comment_precision.py --generated --limit 150 --json"
    assert printed["dataset"]["generated"] is True
    assert printed["dataset"]["issues"] == 150
    assert {"cpus", "python", "sqlite"} <= printed["machine"].keys()
    measured = printed["measured"]
    assert measured["tickets"] == 150
    assert measured["relevant_pairs"] >= 1  # the planted duplicates are found
    floors = [row["floor"] for row in measured["curve"]]
    assert floors == sorted(floors)
    assert floors[0] == 0.0
    assert floors[-1] == 0.3
    assert default_min_relevance() in floors
    assert measured["at_default"]["floor"] == default_min_relevance()
    for row in [measured["baseline"], *measured["curve"]]:
        assert all(0.0 <= row[share] <= 1.0 for share in SHARES)
        assert row["lessons_per_comment"] <= comment_precision.K
    assert set(measured["goals"]) == {
        "commented <= 40%",
        "kept >= 75%",
        "lesson precision >= 3.3%",
        "estimate p50 < 1 ms at 20 candidates",
    }
    assert len(measured["calibration"]) == 10
    assert sum(decile["count"] for decile in measured["calibration"]) == measured["pairs"]
    assert {"5 candidates", "20 candidates"} == measured["estimate_ms"].keys()
    assert measured["estimate_ms"]["5 candidates"]["n"] > 0
    assert {"k=5 with", "k=5 without", "k=20 with", "k=20 without"} == (
        measured["search_ms"].keys()
    )
    steps = measured["estimate_parts_ms_20_candidates"]
    assert set(steps) == {"features", "scope shift", "probabilities", "matched words"}


def test_floor_zero_is_todays_always_five_and_a_higher_floor_never_says_more(
    report: dict[str, Any],
) -> None:
    measured = report["measured"]
    today, zero = measured["baseline"], measured["curve"][0]
    assert today["floor"] is None
    assert today["commented"] > 0.9  # nearly every ticket gets a comment today
    assert {k: zero[k] for k in SAME_AS_TODAY} == {k: today[k] for k in SAME_AS_TODAY}
    assert zero["kept"] == 1.0
    for lower, higher in zip(measured["curve"], measured["curve"][1:], strict=False):
        assert higher["comments"] <= lower["comments"]
        assert higher["shown"] <= lower["shown"]
        assert higher["relevant_comments"] <= lower["relevant_comments"]
    assert measured["curve"][-1]["comments"] < today["comments"]
    assert retrieval.query_embedder is None  # the replay leaves the search as it found it


def test_the_table_names_the_command_the_machine_and_each_goal(
    capsys: pytest.CaptureFixture[str],
) -> None:
    comment_precision.main(["--generated", "--limit", "40"])
    out = capsys.readouterr().out
    assert out.startswith("command: python bench/comment_precision.py --generated --limit 40\n")
    assert "machine: " in out
    assert "always 5 (today)" in out
    for goal in ("commented <= 40%", "kept >= 75%", "lesson precision >= 3.3%"):
        assert f"goal {goal}: " in out


def test_a_limit_below_one_is_refused_in_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as raised:
        comment_precision.main(["--generated", "--limit", "0"])
    assert raised.value.code == 2
    assert "--limit must be at least 1" in capsys.readouterr().err


def shown(bullet_id: str, relevance: float, relevant: bool = False, rank: int = 1) -> Shown:
    return Shown(bullet_id, rank, relevance, relevant)


def test_the_counts_follow_the_bots_floor_comment_by_comment() -> None:
    tickets = [
        # Best lesson passes: a comment with the two above the lessons' floor, one relevant.
        Searched("A-1", [shown("a", 0.2), shown("b", 0.03, True, 2), shown("c", 0.001, rank=3)]),
        # Best lesson below the comment floor: silence, though a relevant lesson is there.
        Searched("A-2", [shown("d", 0.04), shown("e", 0.01, True, 2)]),
        # A comment holding nothing relevant.
        Searched("A-3", [shown("f", 0.5)]),
        Searched("A-4", []),  # nothing in the playbook matched: no comment even today
    ]
    today = comment_precision.always_five(tickets)
    assert (today["comments"], today["relevant_comments"], today["shown"]) == (3, 2, 6)

    row = comment_precision.at_floor(tickets, Floor(comment=0.1, lesson=0.02), 2)

    assert (row["comments"], row["shown"], row["relevant_shown"]) == (2, 3, 1)
    assert row["commented"] == 0.5
    assert row["comment_precision"] == 0.5
    assert row["lesson_precision"] == pytest.approx(1 / 3)
    assert row["kept"] == 0.5
    assert row["lessons_per_comment"] == 1.5


def test_an_embeddings_endpoint_that_does_not_answer_skips_the_trial_and_says_why(
    capsys: pytest.CaptureFixture[str],
) -> None:
    report = comment_precision.main(
        ["--generated", "--limit", "30", "--json", "--embeddings", "http://127.0.0.1:9/v1"]
    )
    assert "not available" in report["features"]["skipped"]
    assert report["measured"]["tickets"] == 30  # the floors are measured all the same
    assert "trial skipped" in capsys.readouterr().err

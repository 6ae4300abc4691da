"""The replay bench's simulated rater: a right one lifts a buried duplicate, a wrong one not."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))

import replay  # noqa: E402
import replay_rater  # noqa: E402
from datasets import duplicate_pairs  # noqa: E402


def issue(key: str, day: int, summary: str, duplicate_of: str | None = None) -> dict[str, Any]:
    """A Jira issue in the dataset's shape, fixed (merged) the day it was opened."""
    return {
        "key": key,
        "project": "DB",
        "created": f"2020-01-{day:02d}T10:00:00.000+0000",
        "resolved": f"2020-01-{day:02d}T12:00:00.000+0000",
        "resolution": "Fixed",
        "summary": summary,
        "description": "",
        "labels": [],
        "components": [],
        "links": [{"type": "Duplicate", "key": duplicate_of}] if duplicate_of else [],
        "comments": [],
    }


# A broad old lesson shares one word with each of six later issues, so it is shown for each and
# helps none. The last issue duplicates a narrow one but shares more words with the broad one,
# which outranks its duplicate while nobody has said the broad lesson does not help.
ROWS = [
    issue("DB-1", 1, "connection pool timeout when the server restarts replication"),
    issue("DB-10", 2, "pool sizing wrong for tenants"),
    issue("DB-11", 3, "timeout in the admin page"),
    issue("DB-12", 4, "restarts lose saved settings"),
    issue("DB-13", 5, "server banner has a typo"),
    issue("DB-14", 6, "connection refused by the proxy"),
    issue("DB-15", 7, "replication lag graph empty"),
    issue("DB-20", 12, "replication stalls under load"),
    issue("DB-21", 13, "replication stalls when the server restarts with a timeout", "DB-20"),
]


def run(accuracy: float | None) -> dict[str, Any]:
    """The loop-on replay of ``ROWS`` with a rater of ``accuracy`` (None: no rater)."""
    pairs = duplicate_pairs(ROWS)
    rater = None
    if accuracy is not None:
        clusters = replay_rater.clusters(len(ROWS), pairs)
        rater = replay_rater.Rater(accuracy, ROWS, clusters)
    return replay.replay(ROWS, pairs, loop=True, rater=rater)


def test_a_right_rater_lifts_the_duplicate_and_a_wrong_one_does_not() -> None:
    unrated, right, wrong = run(None), run(1.0), run(0.0)

    assert unrated["mrr@10"] == 0.5  # the broad lesson first, the duplicate second
    assert right["mrr@10"] == 1.0
    assert wrong["mrr@10"] <= unrated["mrr@10"]
    # Every lesson shown for a closed issue and not cited is rated once, never as a cite.
    assert right["ratings"] == wrong["ratings"] == unrated["shown"] - unrated["cites"]
    assert right["cites"] == wrong["cites"] == unrated["cites"] == 1
    assert (right["ratings_right"], wrong["ratings_right"]) == (1.0, 0.0)


def test_a_rater_right_more_often_is_right_on_every_lesson_a_worse_one_is() -> None:
    seen = [(pr, lesson) for pr in ("p#1", "p#2", "p#3") for lesson in ("A", "B", "C", "D")]
    right_at = {
        accuracy: {key for key in seen if replay_rater.draw(7, *key) < accuracy}
        for accuracy in (0.0, 0.6, 0.9, 1.0)
    }
    assert right_at[0.0] == set()
    assert right_at[0.6] <= right_at[0.9] <= right_at[1.0] == set(seen)


@pytest.mark.parametrize("text", ["0.5,2", "-0.1", "often"])
def test_an_accuracy_outside_zero_to_one_is_refused(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError, match="accuracy"):
        replay_rater.accuracies(text)


def test_accuracies_read_none_and_numbers_once_each() -> None:
    assert replay_rater.accuracies("none, 0.6,0.75,0.6,NONE") == [None, 0.6, 0.75]


def test_an_issue_holding_a_password_is_searched_but_never_becomes_a_lesson() -> None:
    leaky = issue("DB-30", 14, "replica cannot log in")
    leaky["description"] = "It connects with jdbc:postgresql://app:Tr0ub4dor3xQ@db.internal/main"
    rows = [*ROWS, leaky, issue("DB-31", 15, "replica cannot log in after the upgrade", "DB-30")]

    result = replay.replay(rows, duplicate_pairs(rows), loop=True)

    assert result["refused_lessons"] == 1
    assert result["recall@5"] == 0.5  # DB-21 finds DB-20; DB-31 cannot find what was refused

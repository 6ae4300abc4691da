"""A lesson's model ratings in `show`, `stats` and `search --explain`, as text and JSON."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from sqlalchemy import Engine

from playbook.db import transaction
from playbook.ratings.store import Scored, record

RETRY = "Retry payment webhooks with an idempotency key"
LOCKS = "Payment webhooks must not hold a database lock across HTTP"


def _add(cli, text: str, ticket: str) -> str:
    added = cli("add", text, "--learned-from", ticket)
    assert added.exit_code == 0, added.output
    return added.stdout.strip()


def _rate(engine: Engine, bullet_id: str, score: float, reason: str, pr: str, day: int) -> None:
    with transaction(engine) as session:
        record(
            session,
            [Scored(bullet_id, score, reason)],
            pr_key=pr,
            ticket_key="PAY-1",
            model="judge-small",
            prompt_version="rate-1",
            at=datetime(2026, 11, day, 10, 0, tzinfo=UTC),
        )


def test_show_lists_count_mean_and_the_latest_ratings(cli, engine: Engine) -> None:
    retry, locks = _add(cli, RETRY, "PAY-1"), _add(cli, LOCKS, "PAY-2")
    assert "ratings:      none yet" in cli("show", retry).stdout
    _rate(engine, retry, 1.0, "The PR retried with the event id, as the lesson says", "a/b#7", 20)
    # A model's reason may carry a terminal escape: it never reaches the screen.
    _rate(engine, retry, -0.5, "Not relevant: \x1b[31mno webhook\x1b[0m here", "a/b#8", 21)

    shown = cli("show", retry)
    assert shown.exit_code == 0, shown.output
    lines = shown.stdout.splitlines()
    start = lines.index("ratings:      2 ratings, mean +0.25; latest:")
    newest = "  -0.50  a/b#8  judge-small  2026-11-21 10:00  Not relevant: [31mno webhook[0m here"
    assert lines[start + 1] == newest
    assert lines[start + 2].startswith("  +1.00  a/b#7  judge-small  2026-11-20 10:00  The PR")
    assert "\x1b" not in shown.stdout
    assert "ratings:      none yet" in cli("show", locks).stdout

    data = json.loads(cli("show", retry, "--json").stdout)["ratings"]
    assert data["count"] == 2 and data["mean"] == 0.25
    assert [(r["pull_request"], r["score"]) for r in data["latest"]] == [
        ("a/b#8", -0.5),
        ("a/b#7", 1.0),
    ]
    newest = data["latest"][0]
    assert newest["model"] == "judge-small" and newest["prompt_version"] == "rate-1"
    assert newest["ticket"] == "PAY-1" and newest["rated_at"].startswith("2026-11-21T10:00")
    assert json.loads(cli("show", locks, "--json").stdout)["ratings"] == {
        "count": 0,
        "mean": None,
        "latest": [],
    }


def test_show_keeps_the_five_latest(cli, engine: Engine) -> None:
    retry = _add(cli, RETRY, "PAY-1")
    for day in range(1, 8):
        _rate(engine, retry, 0.5, f"day {day}", f"a/b#{day}", day)
    shown = cli("show", retry).stdout
    assert "ratings:      7 ratings, mean +0.50; latest:" in shown
    assert "a/b#7" in shown and "a/b#3" in shown and "a/b#2 " not in shown
    assert len(json.loads(cli("show", retry, "--json").stdout)["ratings"]["latest"]) == 5


def test_stats_count_ratings_lessons_rated_and_the_mean(cli, engine: Engine) -> None:
    retry, locks = _add(cli, RETRY, "PAY-1"), _add(cli, LOCKS, "PAY-2")
    assert "ratings: no lesson rated by the model yet" in cli("stats").stdout
    assert json.loads(cli("stats", "--json").stdout)["ratings"] == {
        "count": 0,
        "lessons": 0,
        "mean": None,
    }
    _rate(engine, retry, 1.0, "used", "a/b#7", 20)
    _rate(engine, retry, 0.5, "used", "a/b#8", 21)
    _rate(engine, locks, -0.6, "beside the point", "a/b#8", 21)
    assert "ratings: 3 by the model on 2 lessons, mean +0.30" in cli("stats").stdout
    rated = json.loads(cli("stats", "--json").stdout)["ratings"]
    assert rated["count"] == 3 and rated["lessons"] == 2
    assert abs(rated["mean"] - 0.3) < 1e-9


def test_search_explain_shows_the_ratings_part_of_the_multiplier(cli, engine: Engine) -> None:
    retry, locks = _add(cli, RETRY, "PAY-1"), _add(cli, LOCKS, "PAY-2")
    before = json.loads(cli("search", "payment webhooks", "--json").stdout)["results"]
    _rate(engine, locks, 1.0, "the PR kept the lock short", "a/b#7", 20)

    table = cli("search", "payment webhooks", "--explain")
    assert table.exit_code == 0, table.output
    lines = table.stdout.splitlines()
    rated = next(i for i, line in enumerate(lines) if f" {locks} " in line)
    unrated = next(i for i, line in enumerate(lines) if f" {retry} " in line)
    assert lines[rated + 1].strip() == "ratings x1.07 (1 rating, mean +1.00)"
    assert lines[unrated + 1].strip() == "ratings x1.00 (not rated)"
    assert " 1.07 " in lines[rated]  # the whole multiplier holds it (no cites yet)

    explained = json.loads(cli("search", "payment webhooks", "--explain", "--json").stdout)
    hits = {hit["id"]: hit for hit in explained["results"]}
    assert hits[locks]["ratings"] == 1 and hits[locks]["rating_mean"] == 1.0
    assert abs(hits[locks]["rating_multiplier"] - 2**0.1) < 1e-6
    assert abs(hits[locks]["multiplier"] - 2**0.1) < 1e-6
    assert hits[retry]["ratings"] == 0 and hits[retry]["rating_mean"] is None
    assert hits[retry]["rating_multiplier"] == 1.0
    # Without --explain the answer keeps its old keys, and only those.
    plain = json.loads(cli("search", "payment webhooks", "--json").stdout)["results"]
    assert {frozenset(hit) for hit in plain} == {frozenset(hit) for hit in before}

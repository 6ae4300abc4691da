"""Counts that mean what they say, as a user meets them: through the CLI, the API and the bot."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sqlalchemy import Engine, select

from playbook.db import transaction
from playbook.lessons import lifecycle
from playbook.models import UsageEvent
from playbook.outcomes import usage
from tests.loop_harness import REPO, Loop
from tests.payloads import fixture, issue_comment, pull_request_review
from tests.support import saw

AUTH = {"Authorization": "Bearer agent-token"}


@pytest.fixture
def lessons(engine: Engine) -> Engine:
    with transaction(engine) as session:
        for text in (
            "Webhook retries need an idempotency key",  # pb-1: 20 merged, 10 rejected
            "Webhook retries need a lock on the order row",  # pb-2: never cited
            "Webhook retries must back off with jitter",  # pb-3: 10 merged, 20 rejected
        ):
            lifecycle.add(session, text, learned_from="CTMS-1", scope="CTMS", actor="seed")
    with transaction(engine) as session:
        for n in range(30):
            usage.record_once(session, "cited", ["pb-1"], ticket_key=f"A-{n}", success=n < 20)
            usage.record_once(session, "cited", ["pb-3"], ticket_key=f"A-{n}", success=n < 10)
    return engine


def bullet(engine: Engine, bullet_id: str):
    with transaction(engine) as session:
        return lifecycle.get(session, bullet_id)


def test_a_lesson_that_mostly_helped_ranks_above_one_never_cited(cli, lessons) -> None:
    result = cli(
        "search", "webhook retries", "--scope", "CTMS", "--rank-by", "confidence", "--json"
    )
    assert result.exit_code == 0, result.output
    ranked = [(hit["id"], round(hit["score"], 3)) for hit in json.loads(result.output)["results"]]
    assert ranked == [("pb-1", 0.656), ("pb-2", 0.5), ("pb-3", 0.344)]
    stats = json.loads(cli("stats", "--json").stdout)
    assert [(b["id"], b["confidence"]) for b in stats["most_helpful"]] == [("pb-1", 0.656)]
    assert [(b["id"], b["confidence"]) for b in stats["most_harmful"]] == [("pb-3", 0.344)]
    text = cli("stats").stdout
    assert "most helpful:\n  pb-1 (+20/-10, confidence 0.66)" in text


def test_cite_rate_reads_at_most_100_percent(cli, lessons) -> None:
    # One load, then the same lesson cited on the ticket again and again, and cited on
    # tickets where it was never shown: once, 200% and more by the old count.
    saw(lessons, "B-1", "B-2", "B-3")
    assert cli("usage", "record", "loaded", "--ids", "pb-2", "--ticket", "B-1").exit_code == 0
    for ticket in ("B-1", "B-1", "B-2", "B-3"):
        cli("usage", "record", "cited", "--ids", "pb-2", "--ticket", ticket, "--success")
    # A report about a ticket the bot never saw is kept apart, not read as use.
    cli("usage", "record", "loaded", "--ids", "pb-1", "--ticket", "NEVER-1")
    stats = json.loads(cli("stats", "--json").stdout)
    assert stats["cite_rate"] == 1.0
    assert stats["cite_rate_counts"] == {"loaded": 1, "cited": 1}
    assert stats["usage"]["not_counted"] == 1
    assert "not counted: 1 reports about tickets the bot never saw" in cli("stats").stdout
    assert "cite rate: 100% (1 of 1 lessons shown on a ticket were cited on it)" in (
        cli("stats").stdout
    )


def test_usage_record_counts_a_lesson_once_per_ticket_and_kind(cli, lessons) -> None:
    saw(lessons, "C-1")
    with transaction(lessons) as session:
        # A merged PR rated pb-2 once: a report's outcome may then rate it once too.
        usage.record(session, "cited", ["pb-2"], ticket_key="C-0", pr_key="a/b#1", success=True)
    first = cli("usage", "record", "cited", "--ids", "pb-2,pb-2", "--ticket", "C-1")
    assert first.stdout.strip() == "recorded 1 cited event"
    again = cli("usage", "record", "cited", "--ids", "pb-2", "--ticket", "C-1", "--failure")
    assert again.exit_code == 0
    assert again.stdout.strip() == "recorded 0 cited events; pb-2 already counted for C-1"
    shown = cli("usage", "record", "loaded", "--ids", "pb-2", "--ticket", "C-1")
    assert shown.stdout.strip() == "recorded 1 loaded event"
    counted = bullet(lessons, "pb-2")
    # The repeat brought the outcome, and settled the one cite (the PR's is the other).
    assert (counted.cites, counted.cites_failure, counted.loads) == (2, 1, 1)


def test_the_cli_the_api_and_an_import_count_one_lesson_once_per_ticket(
    cli, client, lessons, tmp_path: Path
) -> None:
    saw(lessons, "D-1")
    cli("usage", "record", "cited", "--ids", "pb-2", "--ticket", "D-1")
    body = {"event": "cited", "lessonIds": ["pb-2"], "ticketId": "D-1", "phaseSuccess": True}
    answer = client.post("/api/v1/usage", json=body, headers=AUTH)
    assert (answer.status_code, answer.get_json()["events"]) == (201, 0)
    log = tmp_path / "agent.lesson-usage.jsonl"
    log.write_text(json.dumps(body | {"phase": "review"}) + "\n")
    assert cli("import", str(log)).exit_code == 0
    counted = bullet(lessons, "pb-2")
    assert (counted.cites, counted.cites_success) == (1, 1)


@pytest.mark.parametrize(
    "ticket_args",
    [(), ("--ticket", ""), ("--ticket", "   ")],
    ids=["missing", "empty", "blank"],
)
def test_usage_record_without_a_ticket_is_one_line_naming_the_option(
    cli, lessons, ticket_args
) -> None:
    result = cli("usage", "record", "cited", "--ids", "pb-2", *ticket_args)
    assert result.exit_code == 2
    assert result.stderr.strip().splitlines()[-1:] == [
        "error: --ticket is required: the ticket the work was for, e.g. CTMS-4337"
    ]
    assert bullet(lessons, "pb-2").cites == 0


@pytest.mark.parametrize(
    ("args", "field"),
    [
        (("--ticket", "T" * 201), "--ticket"),
        (("--ticket", "A-1", "--phase", "p" * 65), "--phase"),
        (("--ticket", "A-1", "--consumer", "c" * 201), "--consumer"),
        (("--ticket", "A-1", "--query-id", "q" * 65), "--query-id"),
        (("--ticket", "A-\x001"), "--ticket"),
    ],
)
def test_usage_record_refuses_fields_the_database_cannot_hold(cli, lessons, args, field) -> None:
    result = cli("usage", "record", "cited", "--ids", "pb-2", *args)
    assert result.exit_code == 2
    assert result.stdout == ""
    assert result.stderr.strip().splitlines()[-1].startswith(f"error: {field} ")
    assert bullet(lessons, "pb-2").cites == 0


def test_an_imported_usage_event_without_a_ticket_is_refused_naming_ticket_id(
    cli, lessons, tmp_path: Path
) -> None:
    log = tmp_path / "agent.lesson-usage.jsonl"
    log.write_text(
        '{"event": "loaded", "lessonIds": ["pb-2"], "ticketId": "E-1"}\n'
        '{"event": "cited", "lessonIds": ["pb-2"], "phaseSuccess": true}\n'
    )
    result = cli("import", str(log))
    assert result.exit_code == 2
    assert any("2" in line and "ticketId" in line for line in result.output.splitlines())
    assert bullet(lessons, "pb-2").cites == 0


def test_an_api_event_without_a_ticket_is_a_400_naming_ticket_id(client, lessons) -> None:
    events = [
        {"event": "loaded", "lessonIds": ["pb-2"], "ticketId": "F-1"},
        {"event": "cited", "lessonIds": ["pb-2"]},
    ]
    answer = client.post("/api/v1/usage", json=events, headers=AUTH)
    assert answer.status_code == 400
    assert answer.get_json()["message"].startswith("event 2: ticketId is required")
    assert bullet(lessons, "pb-2").loads == 0  # nothing of the request was recorded


def test_a_pr_citing_a_lesson_in_its_body_a_comment_and_a_review_counts_once(
    loop: Loop,
) -> None:
    with transaction(loop.engine) as session:
        lifecycle.add(session, "Dedupe payment webhooks", learned_from="CTMS-1", actor="seed")
    opened = fixture("pull_request.opened")
    opened["pull_request"]["body"] = "Fixes CTMS-4337, following [pb-1]."
    loop.github_event("pull_request.opened", opened)
    comment = issue_comment("pb-1 was the key here", "Codertocat", on_pr=True)
    loop.github_event("issue_comment.created", comment)
    loop.github_event("issue_comment.created", comment)  # a redelivery under a new id
    review = pull_request_review(opened, "Good use of [PB-1].")
    loop.github_event("pull_request_review.submitted", review)
    loop.process()
    with transaction(loop.engine) as session:
        cites = session.scalars(select(UsageEvent).where(UsageEvent.kind == "cited")).all()
        assert [(e.bullet_id, e.pr_key) for e in cites] == [
            ("pb-1", f"{REPO}#{opened['pull_request']['number']}")
        ]
        assert lifecycle.get(session, "pb-1").cites == 1

"""The holdout through the whole bot: held-out tickets get no lessons from any door."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import Engine, func, select

from playbook.db import transaction
from playbook.experiment import assignment
from playbook.models import Bullet, ExperimentAssignment, ExperimentExposure, UsageEvent
from tests.e2e.test_loop import seed
from tests.loop_harness import REPO, Loop, start_loop
from tests.payloads import fixture, pull_request, pull_request_review

SALT = "holdout-test-salt"
PERCENT = 50
LESSONS = (
    ("Spelling errors in the README: run codespell in CI", "x/y#1", REPO),
    ("Status badges break when the default branch is renamed", "x/y#2", REPO),
)
TOKENS = {"PLAYBOOK_API_TOKEN": "maintainer-token"}


def numbers(arm: str, count: int, start: int = 1) -> list[int]:
    """Issue numbers of REPO the test salt puts in ``arm`` at PERCENT."""
    found = []
    number = start
    while len(found) < count:
        if assignment.arm(SALT.encode(), f"{REPO}#{number}", PERCENT) == arm:
            found.append(number)
        number += 1
    return found


@pytest.fixture
def holdout_loop(engine: Engine, database_url: str) -> Iterator[Loop]:
    """The whole bot with the experiment running at 50% under a known salt."""
    running = start_loop(
        engine,
        database_url,
        PLAYBOOK_HOLDOUT_PERCENT=PERCENT,
        PLAYBOOK_EXPERIMENT_SALT=SALT,
        **TOKENS,
    )
    yield running
    running.github.stop()
    running.jira.stop()


def opened(number: int, title: str = "Spelling error in the README file", action: str = "opened"):
    """An issues delivery about issue ``number`` of REPO."""
    payload: dict[str, Any] = copy.deepcopy(fixture(f"issues.{action}"))
    payload["issue"]["number"] = number
    payload["issue"]["title"] = title
    return payload


def loads(engine: Engine, ticket: str) -> int:
    """Load events recorded for a ticket."""
    with transaction(engine) as session:
        return int(
            session.scalar(
                select(func.count())
                .select_from(UsageEvent)
                .where(UsageEvent.kind == "loaded", UsageEvent.ticket_key == ticket)
            )
            or 0
        )


def load_counters(engine: Engine) -> int:
    """Every lesson's load counter, added up."""
    with transaction(engine) as session:
        return int(session.scalar(select(func.sum(Bullet.loads))) or 0)


def exposures(engine: Engine, ticket: str) -> list[tuple[str, str, int | None]]:
    """(lesson, arm, rank) of each exposure kept for a ticket, best rank first."""
    with transaction(engine) as session:
        rows = session.execute(
            select(ExperimentExposure.bullet_id, ExperimentExposure.arm, ExperimentExposure.rank)
            .where(ExperimentExposure.ticket_key == assignment.canonical(ticket))
            .order_by(ExperimentExposure.rank)
        )
        return [tuple(row) for row in rows]  # type: ignore[misc]


def test_held_out_issue_gets_no_comment_and_no_loads_through_edits_and_redeliveries(
    holdout_loop: Loop,
) -> None:
    loop = holdout_loop
    seed(loop.engine, *LESSONS)
    [held] = numbers("held_out", 1)
    ticket = f"{REPO}#{held}"
    loop.github.add_issue(REPO, held, "Spelling error in the README file")
    first = opened(held)
    loop.github_event("issues.opened", first, delivery="held-1")
    loop.github_event("issues.opened", first, delivery="held-1")  # a redelivery
    loop.process()
    assert loop.github.comments_on(REPO, held) == []
    assert loads(loop.engine, ticket) == 0
    assert exposures(loop.engine, ticket) == [("pb-1", "held_out", 1)]
    # An edit that makes another lesson fit re-ranks what would have been shown, still unseen.
    loop.github_event(
        "issues.edited",
        opened(held, "Spelling error; status badges break after the branch rename", "edited"),
    )
    loop.process()
    assert loop.github.comments_on(REPO, held) == []
    assert loads(loop.engine, ticket) == 0
    assert load_counters(loop.engine) == 0
    assert {row[0] for row in exposures(loop.engine, ticket)} == {"pb-1", "pb-2"}
    with transaction(loop.engine) as session:
        row = session.get(ExperimentAssignment, assignment.canonical(ticket))
        assert row is not None and (row.arm, row.percent, row.ticket_ref) == (
            "held_out",
            PERCENT,
            ticket,
        )
        # The issue's own creation time (the fixture's), not when the bot saw it.
        assert row.created_at is not None and row.created_at.year == 2019


def test_shown_issue_gets_its_comment_and_the_exposures_mirror_its_loads(
    holdout_loop: Loop,
) -> None:
    loop = holdout_loop
    seed(loop.engine, *LESSONS)
    [shown] = numbers("shown", 1)
    loop.github.add_issue(REPO, shown, "Spelling error in the README file")
    loop.github_event("issues.opened", opened(shown))
    loop.process()
    [comment] = loop.github.comments_on(REPO, shown)
    assert "[pb-1]" in comment["body"]
    assert exposures(loop.engine, f"{REPO}#{shown}") == [("pb-1", "shown", 1)]
    assert loads(loop.engine, f"{REPO}#{shown}") > 0


def test_api_search_for_a_held_out_ticket_answers_empty(holdout_loop: Loop) -> None:
    loop = holdout_loop
    seed(loop.engine, *LESSONS)
    [held] = numbers("held_out", 1)
    [shown] = numbers("shown", 1)
    headers = {"Authorization": "Bearer maintainer-token"}
    query = {"q": "Spelling error in the README file"}
    # Named before any delivery came: the arm is computed the same way, and honoured.
    for ticket, empty in ((f"{REPO}#{held}", True), (f"{REPO}#{shown}", False)):
        answer = loop.client.get(
            "/api/v1/search", query_string=query | {"ticket": ticket}, headers=headers
        ).get_json()
        assert answer["held_out"] is empty
        assert (answer["lessons"] == []) is empty
        if empty:
            assert "held-out arm" in answer["reason"]
            assert answer["loads_recorded"] == 0
    assert loads(loop.engine, f"{REPO}#{held}") == 0
    assert exposures(loop.engine, f"{REPO}#{held}") == [("pb-1", "held_out", 1)]
    # A search without a ticket is outside the experiment.
    answer = loop.client.get("/api/v1/search", query_string=query, headers=headers).get_json()
    assert answer["held_out"] is False and answer["lessons"]


def test_a_ticket_seen_before_the_experiment_started_stays_outside_it(
    engine: Engine, database_url: str
) -> None:
    [held] = numbers("held_out", 1)
    off = start_loop(engine, database_url, PLAYBOOK_EXPERIMENT_SALT=SALT)
    try:
        seed(off.engine, *LESSONS)
        off.github.add_issue(REPO, held, "Spelling error in the README file")
        off.github_event("issues.opened", opened(held))
        off.process()
        assert len(off.github.comments_on(REPO, held)) == 1
    finally:
        off.github.stop()
        off.jira.stop()
    on = start_loop(
        engine, database_url, PLAYBOOK_HOLDOUT_PERCENT=PERCENT, PLAYBOOK_EXPERIMENT_SALT=SALT
    )
    try:
        on.github.add_issue(REPO, held, "Spelling error in the README file")
        on.github_event(
            "issues.edited",
            opened(held, "Spelling error; status badges break after the branch rename", "edited"),
        )
        on.process()
        # Its comment was edited as usual: the ticket is not in the experiment.
        [comment] = on.github.comments_on(REPO, held)
        assert "[pb-2]" in comment["body"]
        with transaction(engine) as session:
            assert assignment.assigned(session, f"{REPO}#{held}") is None
            assert assignment.running(session) is not None  # the setting started a period
    finally:
        on.github.stop()
        on.jira.stop()


def test_a_new_percentage_applies_to_new_tickets_only(engine: Engine, database_url: str) -> None:
    first, second = numbers("shown", 2)
    for percent, number in ((10, first), (20, second)):
        loop = start_loop(
            engine, database_url, PLAYBOOK_HOLDOUT_PERCENT=percent, PLAYBOOK_EXPERIMENT_SALT=SALT
        )
        try:
            loop.github.add_issue(REPO, first, "Spelling error in the README file")
            loop.github.add_issue(REPO, number, "Spelling error in the README file")
            loop.github_event("issues.edited", opened(first, action="edited"))
            loop.github_event("issues.opened", opened(number))
            loop.process()
        finally:
            loop.github.stop()
            loop.jira.stop()
    with transaction(engine) as session:
        assert assignment.assigned(session, f"{REPO}#{first}").percent == 10  # type: ignore[union-attr]
        assert assignment.assigned(session, f"{REPO}#{second}").percent == 20  # type: ignore[union-attr]
        started = [(p.percent, p.stopped_at is None) for p in assignment.periods(session)]
        assert started == [(10, False), (20, True)]


def test_held_out_jira_issue_gets_no_comment(holdout_loop: Loop) -> None:
    loop = holdout_loop
    seed(loop.engine, ("Payment webhook retries must be idempotent", "CTMS-4001", "CTMS"))
    keys = [f"CTMS-{n}" for n in range(5000, 5200)]
    held = next(k for k in keys if assignment.arm(SALT.encode(), k, PERCENT) == "held_out")
    shown = next(k for k in keys if assignment.arm(SALT.encode(), k, PERCENT) == "shown")
    for key in (held, shown):
        payload = copy.deepcopy(fixture("jira.issue_created"))
        payload["issue"]["key"] = key
        loop.jira.add_issue(key, payload["issue"]["fields"]["summary"])
        loop.jira_event(payload)
    loop.process()
    assert loop.jira.calls("POST", f"/rest/api/2/issue/{held}/comment") == []
    assert len(loop.jira.calls("POST", f"/rest/api/2/issue/{shown}/comment")) == 1
    assert exposures(loop.engine, held) == [("pb-1", "held_out", 1)]
    assert loads(loop.engine, held) == 0


def test_pull_requests_decide_each_arm_s_outcome_and_the_report_counts_them(
    holdout_loop: Loop,
) -> None:
    loop = holdout_loop
    seed(loop.engine, *LESSONS)
    [held] = numbers("held_out", 1)
    [shown] = numbers("shown", 1)
    for number in (held, shown):
        loop.github.add_issue(REPO, number, "Spelling error in the README file")
        loop.github_event("issues.opened", opened(number))
    loop.process()
    # The shown ticket's PR merges after a changes-requested review; the held-out ticket's
    # first PR closes unmerged.
    merged = pull_request(
        "opened", number=500 + shown, title="Fix spelling", body=f"Fixes #{shown}"
    )
    loop.github_event("pull_request.opened", merged)
    review = pull_request_review(merged, "please run codespell")
    review["review"].update(id=9001, state="changes_requested", submitted_at="2026-11-03T09:00:00Z")
    loop.github_event("pull_request_review.submitted", review)
    loop.github_event("pull_request_review.submitted", review)  # redelivered: one round
    loop.github_event(
        "pull_request.closed",
        pull_request(
            "closed", number=500 + shown, title="Fix spelling", body=f"Fixes #{shown}", merged=True
        ),
    )
    closing = {"title": "Fix spelling", "body": f"Fixes #{held}"}
    loop.github_event("pull_request.opened", pull_request("opened", number=500 + held, **closing))
    loop.github_event("pull_request.closed", pull_request("closed", number=500 + held, **closing))
    loop.process()
    headers = {"Authorization": "Bearer maintainer-token"}
    report = loop.client.get("/api/v1/experiment", headers=headers).get_json()
    arms = report["arms"]
    assert (arms["shown"]["tickets"], arms["shown"]["with_outcome"], arms["shown"]["merged"]) == (
        1,
        1,
        1,
    )
    assert arms["shown"]["mean_review_rounds"] == 1
    assert (arms["held_out"]["with_outcome"], arms["held_out"]["merged"]) == (1, 0)
    assert report["difference"]["merge_rate"] == 1.0
    assert "not conclusive" in report["verdict"] or "Not enough data" in report["verdict"]

"""Side effects happen once: a comment whose POST timed out, or whose worker was killed mid-way,
is found by its hidden marker and adopted, never posted twice; loads and cites count once."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, func, select, update

from playbook.db import transaction
from playbook.lessons import lifecycle
from playbook.models import BotComment, Delivery, UsageEvent
from tests.bot.processes import all_finished, kill, start_cli, stop_processes, wait_for
from tests.loop_harness import _KEYS, APP_ID, REPO, Loop, start_loop
from tests.payloads import fixture

LESSONS = (
    ("Spelling errors in the README: run codespell in CI", REPO),
    ("README typos: the docs job fails on misspelled words", REPO),
)


def seed(engine: Engine) -> None:
    with transaction(engine) as session:
        for text, scope in LESSONS:
            lifecycle.add(session, text, learned_from="x/y#1", scope=scope, actor="seed")


def retry_now(engine: Engine) -> None:
    """Make failed deliveries due at once (the test does not wait out the backoff)."""
    with transaction(engine) as session:
        session.execute(
            update(Delivery).where(Delivery.status == "failed").values(next_attempt_at=func.now())
        )


def drain(loop: Loop, rounds: int = 10) -> None:
    for _ in range(rounds):
        retry_now(loop.engine)
        loop.process()
        with transaction(loop.engine) as session:
            open_rows = session.scalar(
                select(func.count()).where(Delivery.status.in_(("pending", "failed")))
            )
        if not open_rows:
            return


def bot_comments(loop: Loop, number: int = 1) -> list[dict[str, Any]]:
    return [c for c in loop.github.comments_on(REPO, number) if c["user"]["type"] == "Bot"]


@pytest.fixture
def slow(engine: Engine, database_url: str):
    """The loop with a 1 s client timeout against a GitHub that answers comment POSTs in 2 s."""
    # About posting once against a slow peer: every matching lesson is shown (no floor).
    loop = start_loop(engine, database_url, PLAYBOOK_HTTP_TIMEOUT=1, PLAYBOOK_MIN_RELEVANCE=0)
    loop.github.post_delay = 2.0
    yield loop
    loop.github.stop()
    loop.jira.stop()


def test_a_comment_post_that_timed_out_is_adopted_not_posted_again(slow: Loop) -> None:
    seed(slow.engine)
    slow.github.add_issue(REPO, 1, "Spelling error in the README file")
    slow.github_event("issues.opened", fixture("issues.opened"))
    slow.process()
    with transaction(slow.engine) as session:
        first = session.scalars(select(Delivery)).one()
        assert (first.status, first.error_kind) == ("failed", "transient")
        assert "Timeout" in first.last_error or "timed out" in first.last_error
    assert len(bot_comments(slow)) == 1  # GitHub has it, the bot never heard
    drain(slow)
    [comment] = bot_comments(slow)
    assert f"<!-- playbook-bot:lessons {REPO}#1 -->" in comment["body"]
    with transaction(slow.engine) as session:
        row = session.scalars(select(BotComment)).one()
        assert (row.state, row.external_id) == ("posted", str(comment["id"]))
        loads = session.scalar(select(func.count()).select_from(UsageEvent))
    assert loads == 2  # each lesson shown once, however many attempts it took
    assert len(slow.github.calls("POST", f"/repos/{REPO}/issues/1/comments")) == 1


def test_fast_retries_against_a_slow_peer_still_leave_one_comment(slow: Loop) -> None:
    seed(slow.engine)
    slow.github.add_issue(REPO, 1, "Spelling error in the README file")
    for name in ("issues.opened", "issues.edited", "issues.labeled"):
        slow.github_event(name, fixture(name))
    drain(slow, rounds=15)
    assert len(bot_comments(slow)) == 1
    with transaction(slow.engine) as session:
        statuses = set(session.scalars(select(Delivery.status)))
    assert statuses <= {"done", "ignored"}


def test_a_marker_written_by_someone_else_is_not_adopted(slow: Loop) -> None:
    seed(slow.engine)
    slow.github.add_issue(REPO, 1, "Spelling error in the README file")
    forged = slow.github.add_comment(
        REPO, 1, f"gotcha <!-- playbook-bot:lessons {REPO}#1 -->", user="mallory"
    )
    slow.github.post_delay = 0
    slow.github.fail("POST", f"/repos/{REPO}/issues/1/comments", 502)  # outcome unknown
    slow.github_event("issues.opened", fixture("issues.opened"))
    drain(slow)
    [mine] = bot_comments(slow)
    assert slow.github.comments[forged["id"]]["body"].startswith("gotcha")  # left alone
    assert slow.github.calls("PATCH") == []
    assert "[pb-1]" in mine["body"]


def test_a_jira_comment_that_timed_out_is_adopted_by_its_property(
    engine: Engine, database_url: str
) -> None:
    # About posting once against a slow peer: every matching lesson is shown (no floor).
    loop = start_loop(engine, database_url, PLAYBOOK_HTTP_TIMEOUT=1, PLAYBOOK_MIN_RELEVANCE=0)
    try:
        with transaction(engine) as session:
            lifecycle.add(
                session,
                "Payment webhook retries must be idempotent: dedupe on the event id",
                learned_from="CTMS-4001",
                scope="CTMS",
                actor="seed",
            )
        loop.jira.add_issue("CTMS-4337", "Checkout times out when the payment webhook retries")
        # Someone quoting the bot is not the bot: same text, another author, no property.
        loop.jira.add_comment("CTMS-4337", "h4. Lessons from the playbook (quoted)")
        loop.jira.post_delay = 2.0
        loop.jira_event(fixture("jira.issue_created"))
        drain(loop)
        mine = [c for c in loop.jira.comments["CTMS-4337"] if c["author"]["accountId"] == "bot"]
        assert len(mine) == 1
        assert loop.jira.properties[mine[0]["id"]]["playbook-bot"]["marker"] == (
            "playbook-bot:lessons CTMS-4337"
        )
        assert len(loop.jira.calls("POST", "/rest/api/2/issue/CTMS-4337/comment")) == 1
    finally:
        loop.github.stop()
        loop.jira.stop()


def test_a_delivery_repeated_20_times_records_each_cite_once(loop: Loop) -> None:
    seed(loop.engine)
    payload = fixture("pull_request.opened")
    payload["pull_request"]["body"] = "Applied [pb-1] and [PB-1] and pb-2, pb-2."
    for _ in range(20):
        loop.github_event("pull_request.opened", payload)  # a new delivery id each time
    loop.process()
    with transaction(loop.engine) as session:
        cites = session.scalars(select(UsageEvent.bullet_id).where(UsageEvent.kind == "cited"))
        assert sorted(cites) == ["pb-1", "pb-2"]
        assert lifecycle.get(session, "pb-1").cites == 1


# --- real worker processes, killed mid-post --------------------------------------------------


def worker_env(loop: Loop, database_url: str, **overrides: str) -> dict[str, str]:
    private, _public = _KEYS
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PLAYBOOK_", "GITHUB_"))}
    env.update(
        PLAYBOOK_DATABASE_URL=database_url,
        GITHUB_APP_ID=str(APP_ID),
        GITHUB_APP_PRIVATE_KEY=private,
        GITHUB_API_URL=loop.github.url,
        PLAYBOOK_GITHUB_SECONDS_BETWEEN_REQUESTS="0",
        PLAYBOOK_GITHUB_SECONDS_BETWEEN_WRITES="0",
        PLAYBOOK_HTTP_TIMEOUT="1",
        PLAYBOOK_WORKER_LEASE_SECONDS="2",
        PLAYBOOK_WORKER_POLL_SECONDS="0.1",
        PLAYBOOK_RETRY_BASE_SECONDS="0.2",
        PLAYBOOK_MAX_ATTEMPTS="20",
        PLAYBOOK_SCHEDULER="0",
        LOG_LEVEL="WARNING",
    )
    env.update(overrides)
    return env


def all_claimed(engine: Engine) -> bool:
    """Whether every delivery is in a worker's hands (none waits unclaimed)."""
    with transaction(engine) as session:
        return not session.scalar(
            select(func.count()).where(Delivery.status == "pending", Delivery.locked_by.is_(None))
        )


@pytest.mark.slow
def test_workers_killed_mid_post_leave_exactly_one_comment_per_ticket(
    loop: Loop, database_url: str, tmp_path: Path
) -> None:
    seed(loop.engine)
    for number in (1, 2, 3):
        loop.github.add_issue(REPO, number, f"Spelling error in the README file, part {number}")
    loop.github.post_delay = 2.5  # the comment exists 2.5 s before anyone hears of it
    for number in (1, 2, 3):
        for name in ("issues.opened", "issues.labeled"):
            payload = fixture(name)
            payload["issue"]["number"] = number
            assert loop.github_event(name, payload).status_code == 202
    # The victim claims all six in its first batch (of ten) ...
    victim = start_cli(worker_env(loop, database_url), tmp_path, "worker")
    wait_for(lambda: all_claimed(loop.engine), "the victim claimed every delivery")
    # ... so the survivors, started now, find nothing to take until it is dead and its leases
    # have run out. Small batches share the work between them.
    survivor_env = worker_env(loop, database_url, PLAYBOOK_WORKER_BATCH="2")
    survivors = [start_cli(survivor_env, tmp_path, "worker") for _ in range(2)]
    try:
        wait_for(lambda: loop.github.calls("POST", f"/repos/{REPO}/issues/"), "the first post")
        time.sleep(0.3)  # inside the POST: GitHub has stored the comment, the worker waits
        kill(victim)
        wait_for(lambda: all_finished(loop.engine), "the survivors finished the inbox")
    finally:
        if victim.process.is_alive():  # the test failed before the kill
            kill(victim)
        stop_processes(*survivors)
    with transaction(loop.engine) as session:
        outcomes = dict(
            session.execute(select(Delivery.status, func.count()).group_by(Delivery.status)).all()
        )
    assert outcomes == {"done": 6}
    for number in (1, 2, 3):
        assert len(bot_comments(loop, number)) == 1, number

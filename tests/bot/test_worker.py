"""The worker: exactly-once processing, retries with backoff, dead letters, leases, crashes."""

from __future__ import annotations

import json
import threading
import urllib.request
import uuid
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import Engine, select

from bot.config import Settings
from bot.handlers.router import Event, Router
from bot.worker import PermanentError, Services, Worker
from playbook import clock
from playbook.db import transaction
from playbook.deliveries import inbox
from playbook.models import Delivery
from tests.bot.processes import (
    all_finished,
    go,
    kill,
    lines,
    ready,
    reaping_on_failure,
    spawn_workers,
    start_worker,
    stop_processes,
    wait_for,
)
from tests.payloads import fixture_body
from tests.support import GITHUB_SECRET, serving
from webhooks import create_app
from webhooks.signatures import sign

T0 = datetime(2026, 11, 3, 9, 0, tzinfo=UTC)


class Upstream503(Exception):
    """Looks like a GitHub/Jira 5xx to the worker (it carries a status)."""

    status = 503


def store(engine: Engine, n: int = 1, event: str = "issues", action: str = "opened") -> list[str]:
    ids = []
    with transaction(engine) as session:
        for _ in range(n):
            delivery_id = str(uuid.uuid4())
            inbox.accept(
                session,
                source="github",
                event=event,
                action=action,
                delivery_id=delivery_id,
                payload=json.dumps({"action": action}),
            )
            ids.append(delivery_id)
    return ids


def statuses(engine: Engine) -> list[tuple[str, int]]:
    with transaction(engine) as session:
        rows = session.scalars(select(Delivery).order_by(Delivery.id))
        return [(row.status, row.attempts) for row in rows]


@pytest.fixture
def calls() -> list[Event]:
    return []


@pytest.fixture
def make_worker(engine: Engine, settings: Settings):
    def build(router: Router) -> Worker:
        return Worker(Services(engine=engine, settings=settings), name="w1", handlers=router)

    return build


def test_a_delivery_is_handled_once_and_marked_done(engine, make_worker, calls) -> None:
    router = Router()
    router.register("github", "issues", "opened")(lambda event, _: calls.append(event))
    [delivery_id] = store(engine)
    worker = make_worker(router)
    assert worker.run_once() == 1
    assert worker.run_once() == 0
    assert [event.delivery_id for event in calls] == [delivery_id]
    assert calls[0].payload == {"action": "opened"}
    assert statuses(engine) == [("done", 1)]


def test_action_specific_and_general_handlers_both_run(engine, make_worker, calls) -> None:
    router = Router()
    router.register("github", "issues", "opened")(lambda e, _: calls.append("specific"))
    router.register("github", "issues")(lambda e, _: calls.append("general"))
    router.register("github", "issues", "closed")(lambda e, _: calls.append("other"))
    store(engine)
    make_worker(router).run_once()
    assert calls == ["specific", "general"]


def test_an_event_without_handler_is_ignored_with_why(engine, make_worker, caplog) -> None:
    store(engine, event="sponsorship", action="created")
    caplog.set_level("INFO")
    make_worker(Router()).run_once()
    assert statuses(engine) == [("ignored", 1)]
    assert "no handler for github sponsorship.created" in caplog.text
    with transaction(engine) as session:
        assert session.scalars(select(Delivery.reason)).one() == (
            "no handler for github sponsorship.created"
        )


def test_a_part_that_stood_aside_says_why_when_another_acted(engine, make_worker) -> None:
    from bot.handlers.context import Ignored

    router = Router()
    router.register("github", "pull_request", "opened")(lambda e, _: None)

    @router.register("github", "pull_request", "opened")
    def quiet(_event, _services):
        raise Ignored("octo/app asked for no PR comment (pr_comment: false)")

    store(engine, event="pull_request")
    make_worker(router).run_once()
    assert statuses(engine) == [("done", 1)]
    with transaction(engine) as session:
        assert session.scalars(select(Delivery.reason)).one() == (
            "octo/app asked for no PR comment (pr_comment: false)"
        )


def test_transient_errors_retry_with_backoff_then_die(engine, make_worker) -> None:
    router = Router()

    @router.register("github", "issues")
    def flaky(event, _services):
        raise Upstream503("GitHub answered 503")

    with clock.frozen(T0):
        store(engine)
    worker = make_worker(router)
    now = T0
    delays = []
    for attempt in range(1, 6):
        with clock.frozen(now):
            assert worker.run_once() == 1
            assert worker.run_once() == 0  # not due again yet
        with transaction(engine) as session:
            row = session.scalars(select(Delivery)).one()
            if attempt < 5:
                assert (row.status, row.attempts) == ("failed", attempt)
                delays.append(row.next_attempt_at - now)
                now = row.next_attempt_at
            else:
                assert row.status == "dead"
                assert "GitHub answered 503" in (row.last_error or "")
    assert delays == [timedelta(seconds=s) for s in (10, 20, 40, 80)]


def test_a_permanent_error_is_dead_at_once(engine, make_worker) -> None:
    router = Router()

    @router.register("github", "issues")
    def broken(event, _services):
        raise PermanentError("payload has no issue")

    store(engine)
    make_worker(router).run_once()
    assert statuses(engine) == [("dead", 1)]


def test_dead_deliveries_can_be_replayed_from_the_cli(engine, make_worker, cli, calls) -> None:
    router = Router()
    state = {"broken": True}

    @router.register("github", "issues")
    def sometimes(event, _services):
        if state["broken"]:
            raise PermanentError("bug in handler")
        calls.append(event)

    [delivery_id] = store(engine)
    make_worker(router).run_once()
    listed = cli("deliveries", "list", "--status", "dead")
    assert delivery_id in listed.stdout and "bug in handler" in listed.stdout
    shown = json.loads(cli("deliveries", "show", delivery_id).stdout)
    assert shown["status"] == "dead" and "bug in handler" in shown["last_error"]
    assert shown["payload"] == {"action": "opened"}
    assert cli("deliveries", "replay", "--status", "dead").stdout.strip() == (
        "queued 1 delivery for processing"
    )
    state["broken"] = False
    make_worker(router).run_once()
    assert [event.delivery_id for event in calls] == [delivery_id]
    assert statuses(engine) == [("done", 1)]
    assert cli("deliveries", "replay", delivery_id).exit_code == 0
    assert cli("deliveries", "replay", "no-such-guid").exit_code == 2
    assert cli("deliveries", "replay").exit_code == 2


def test_a_claimed_delivery_returns_after_its_lease_expires(engine: Engine) -> None:
    with clock.frozen(T0):
        store(engine)
    lease = timedelta(minutes=5)
    with clock.frozen(T0), transaction(engine) as session:
        assert len(inbox.claim(session, "crashed-worker", lease=lease)) == 1
    with clock.frozen(T0 + timedelta(minutes=4)), transaction(engine) as session:
        assert inbox.claim(session, "other", lease=lease) == []
    with clock.frozen(T0 + timedelta(minutes=6)), transaction(engine) as session:
        [again] = inbox.claim(session, "other", lease=lease)
        assert again.attempts == 2 and again.locked_by == "other"


def test_delivery_id_is_on_every_log_line(engine, make_worker, capsys) -> None:
    import logging

    from bot.logs import configure_logging

    router = Router()
    router.register("github", "issues")(lambda e, _: logging.getLogger("handler").info("hello"))
    [delivery_id] = store(engine)
    root = logging.getLogger()
    saved = (root.handlers[:], root.level)
    try:
        configure_logging("INFO", "json")
        make_worker(router).run_once()
    finally:
        root.handlers[:], _ = saved[0], root.setLevel(saved[1])
    lines = [json.loads(line) for line in capsys.readouterr().err.splitlines() if line]
    mine = [line for line in lines if line["logger"] in ("handler", "bot.worker")]
    assert {line["message"] for line in mine} >= {"hello", "github issues.opened done"}
    assert {line["delivery"] for line in mine} == {delivery_id}


# --- concurrency over a live server --------------------------------------------------------


@pytest.fixture
def live_server(engine: Engine, settings: Settings):
    with serving(create_app(settings, engine=engine)) as url:
        yield url


def post(url: str, body: bytes, delivery: str) -> int:
    request = urllib.request.Request(
        f"{url}/webhooks/github",
        data=body,
        method="POST",
        headers={
            "Content-Type": "application/json",
            "X-GitHub-Event": "issues",
            "X-GitHub-Delivery": delivery,
            "X-Hub-Signature-256": sign(GITHUB_SECRET, body),
        },
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status
    except urllib.error.HTTPError as error:
        return error.code


def test_the_same_delivery_posted_20_times_at_once_is_processed_once(
    live_server: str, engine: Engine, make_worker, calls
) -> None:
    body = fixture_body("issues.opened")
    barrier = threading.Barrier(20)
    codes: list[int] = []

    def send() -> None:
        barrier.wait()
        codes.append(post(live_server, body, "the-one"))

    threads = [threading.Thread(target=send) for _ in range(20)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert Counter(codes) == {202: 1, 200: 19}
    router = Router()
    router.register("github", "issues")(lambda event, _: calls.append(event.delivery_id))
    worker = make_worker(router)
    while worker.run_once():
        pass
    assert calls == ["the-one"]


# --- several worker processes --------------------------------------------------------------


@pytest.mark.slow
def test_two_worker_processes_share_500_deliveries_without_doubles(
    engine: Engine, database_url: str, tmp_path: Path
) -> None:
    record = tmp_path / "handled.txt"
    # Both workers are up before the deliveries arrive, so neither drains them alone.
    workers = spawn_workers(2, database_url, record)
    ids = store(engine, 500)
    try:
        wait_for(lambda: all_finished(engine), "500 deliveries handled")
    finally:
        stop_processes(*workers)
    handled = [line.split() for line in lines(record)]
    counts = Counter(delivery for delivery, _pid in handled)
    assert set(counts) == set(ids)  # none lost
    assert max(counts.values()) == 1  # none twice
    assert statuses(engine) == [("done", 1)] * 500
    # Both processes took part (each claims small batches), so the test proves sharing.
    assert len({pid for _delivery, pid in handled}) == 2


@pytest.mark.slow
def test_a_worker_killed_mid_batch_leaves_nothing_lost_or_doubled(
    engine: Engine, database_url: str, tmp_path: Path
) -> None:
    ids = store(engine, 20)
    record = tmp_path / "handled.txt"
    # The survivor starts beside the victim and waits at its gate until the victim is dead.
    victim = start_worker(database_url, record, "--sleep", "0.2", "--lease", "1")
    survivor = start_worker(database_url, record, "--lease", "30", "--gate")
    with reaping_on_failure(victim, survivor):
        ready(victim, survivor)
        wait_for(lambda: len(lines(record)) >= 3, "the victim handled 3 deliveries")
        kill(victim)
        done_before = len(lines(record))
        assert 3 <= done_before < 20
        # It takes what nobody holds at once, and the victim's batch when its lease (renewed until
        # the kill) runs out.
        go(survivor)
        wait_for(lambda: all_finished(engine), "the survivor finished the inbox")
        stop_processes(survivor)
    counts = Counter(line.split()[0] for line in lines(record))
    assert set(counts) == set(ids)  # none lost
    assert {status for status, _attempts in statuses(engine)} == {"done"}
    # At-least-once: the one delivery in the victim's hands when it died may have run its
    # handler before the kill; it runs again (handlers are idempotent), nothing else does.
    assert sum(n - 1 for n in counts.values()) <= 1

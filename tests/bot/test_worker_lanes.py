"""One worker, several lanes: different tickets side by side, one ticket in order, nothing lost."""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy import Engine, select, text

from bot.config import Settings
from bot.handlers import installations
from bot.handlers.router import Event, Router
from bot.worker import Services, Worker
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
    start_worker,
    stop_processes,
    wait_for,
)
from tests.payloads import bare_issue, fixture_body
from tests.support import put


def outcomes(engine: Engine) -> dict[int, tuple[str, str | None]]:
    with transaction(engine) as session:
        return {row.id: (row.status, row.reason) for row in session.scalars(select(Delivery))}


def worker(engine: Engine, settings: Settings, router: Router, lanes: int) -> Worker:
    return Worker(
        Services(engine=engine, settings=settings), name="w1", handlers=router, lanes=lanes
    )


def test_deliveries_for_different_tickets_run_side_by_side(
    engine: Engine, settings: Settings
) -> None:
    # Each handler waits for the other one: they only both finish if they run at once.
    meeting = threading.Barrier(2, timeout=30)
    router = Router()
    router.register("github", "issues")(lambda event, _: meeting.wait())
    ids = [put(engine, bare_issue(number)) for number in (1, 2)]
    assert worker(engine, settings, router, lanes=2).run_once() == 2
    assert [outcomes(engine)[row_id][0] for row_id in ids] == ["done", "done"]


def test_one_tickets_deliveries_never_overlap_and_keep_their_order(
    engine: Engine, settings: Settings
) -> None:
    lock = threading.Lock()
    running: set[int | None] = set()
    overlaps: list[int | None] = []
    seen: list[tuple[int | None, str]] = []
    router = Router()

    @router.register("github", "issues")
    def handle(event: Event, _services) -> None:
        number = event.payload.get("issue", {}).get("number")
        with lock:
            if number in running:
                overlaps.append(number)
            running.add(number)
        time.sleep(0.05)  # long enough for a second lane to barge in, were it allowed
        with lock:
            running.discard(number)
            seen.append((number, event.delivery_id))

    stored: list[tuple[int | None, str]] = []
    # Tickets 1 and 2 three times each, interleaved, and rows whose ticket cannot be told.
    for number in (1, 2, 1, None, 2, 1, None, 2):
        payload = bare_issue(number) if number else '{"action": "opened"}'
        row_id = put(engine, payload)
        with transaction(engine) as session:
            stored.append((number, session.get(Delivery, row_id).delivery_id))
    assert worker(engine, settings, router, lanes=3).run_once() == 8
    assert overlaps == []
    for number in (1, 2, None):
        assert [d for n, d in seen if n == number] == [d for n, d in stored if n == number]
    assert {status for status, _ in outcomes(engine).values()} == {"done"}


# A stray sys.exit() in a lane's thread is the point of the test.
@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")
def test_an_exit_in_one_lane_stops_the_worker_once_the_other_lanes_finish(
    engine: Engine, settings: Settings
) -> None:
    router = Router()

    @router.register("github", "issues")
    def handle(event: Event, _services) -> None:
        if event.payload["issue"]["number"] == 1:
            raise SystemExit("a library called sys.exit()")

    exits, other = put(engine, bare_issue(1)), put(engine, bare_issue(2))
    with pytest.raises(SystemExit):
        worker(engine, settings, router, lanes=2).run_once()
    # The other lane finished its delivery; the exiting one stays leased, to be taken again
    # when its lease runs out (as without lanes: `serve` then starts a new worker).
    assert outcomes(engine)[other] == ("done", None)
    with transaction(engine) as session:
        row = session.get(Delivery, exits)
        assert (row.status, row.locked_by) == ("pending", "w1")


def test_a_removed_installation_stops_the_later_deliveries_of_its_batch(
    engine: Engine, settings: Settings
) -> None:
    handled: list[int] = []
    router = Router()
    router.register("github", "installation")(installations.installation_changed)
    router.register("github", "issues")(lambda event, _: handled.append(event.installation_id))
    removal = json.loads(fixture_body("installation.deleted"))
    gone = removal["installation"]["id"]
    put(engine, json.dumps(removal), event="installation", action="deleted")
    after = put(engine, bare_issue(7), installation_id=gone)
    other = put(engine, bare_issue(8), installation_id=gone + 1)
    assert worker(engine, settings, router, lanes=4).run_once() == 3
    assert outcomes(engine)[after] == ("ignored", f"installation {gone} was removed")
    assert outcomes(engine)[other] == ("done", None)
    assert handled == [gone + 1]


@pytest.mark.slow
def test_a_laned_worker_killed_mid_batch_loses_nothing(
    engine: Engine, database_url: str, tmp_path: Path
) -> None:
    ids = [put(engine, bare_issue(number)) for number in range(1, 21)]
    record = tmp_path / "handled.txt"
    # The survivor starts beside the victim and waits at its gate until the victim is dead.
    victim = start_worker(
        database_url, record, "--sleep", "0.2", "--lease", "1", "--lanes", "2", "--batch", "6"
    )
    survivor = start_worker(database_url, record, "--lease", "30", "--lanes", "2", "--gate")
    with reaping_on_failure(victim, survivor):
        ready(victim, survivor)
        wait_for(lambda: len(lines(record)) >= 3, "the victim handled 3 deliveries")
        kill(victim)
        assert 3 <= len(lines(record)) < 20
        # It takes what nobody holds at once, and the victim's batch when its leases run out.
        go(survivor)
        wait_for(lambda: all_finished(engine), "the survivor finished the inbox")
        stop_processes(survivor)
    counts = Counter(line.split()[0] for line in lines(record))
    assert len(counts) == len(ids)  # none lost
    assert {status for status, _ in outcomes(engine).values()} == {"done"}
    # At-least-once, as with one lane: only the deliveries in the victim's hands when it died
    # (one per lane) may have run before the kill and run again.
    assert sum(n - 1 for n in counts.values()) <= 2


def test_an_outcome_written_without_waiting_leaves_later_commits_durable(
    engine: Engine,
) -> None:
    if engine.dialect.name != "postgresql":
        pytest.skip("asynchronous commit is PostgreSQL's")
    row_id = put(engine, bare_issue(1))
    with transaction(engine) as session:
        inbox.claim(session, "w1", lease=timedelta(minutes=5))
    with transaction(engine) as session:
        inbox.asynchronous_commit(session)
        assert session.scalar(text("SHOW synchronous_commit")) == "off"
        assert inbox.complete(session, row_id, "w1")
    # Only that transaction skipped the wait: a comment reservation on the same pooled
    # connection right after it must still reach the disk before the comment is posted.
    for _ in range(3):
        with transaction(engine) as session:
            assert session.scalar(text("SHOW synchronous_commit")) == "on"
    assert outcomes(engine)[row_id] == ("done", None)


def test_a_delivery_with_a_large_payload_is_handled_like_any_other(
    engine: Engine, settings: Settings
) -> None:
    seen: dict[int, int] = {}
    router = Router()

    @router.register("github", "issues")
    def handle(event: Event, _services) -> None:
        seen[event.payload["issue"]["number"]] = len(event.payload.get("padding", ""))

    # Large payloads are parsed again in their turn rather than kept parsed with the batch.
    large = json.loads(bare_issue(1))
    large["padding"] = "x" * (2 << 20)
    ids = [put(engine, json.dumps(large)), put(engine, bare_issue(2))]
    assert worker(engine, settings, router, lanes=2).run_once() == 2
    assert seen == {1: 2 << 20, 2: 0}
    assert [outcomes(engine)[row_id][0] for row_id in ids] == ["done", "done"]


def test_a_slow_delivery_holds_up_only_its_own_ticket(engine: Engine, settings: Settings) -> None:
    others_done = threading.Event()
    handled: list[int] = []
    router = Router()

    @router.register("github", "issues")
    def handle(event: Event, _services) -> None:
        number = event.payload["issue"]["number"]
        if number == 1:
            # A slow GitHub, say: it only returns once every other ticket has been handled,
            # which happens only if the free lane takes them all meanwhile.
            assert others_done.wait(timeout=30)
        handled.append(number)
        if len(handled) == 4:
            others_done.set()

    ids = [put(engine, bare_issue(number)) for number in range(1, 6)]
    assert worker(engine, settings, router, lanes=2).run_once() == 5
    assert handled[-1] == 1 and sorted(handled) == [1, 2, 3, 4, 5]
    assert {outcomes(engine)[row_id][0] for row_id in ids} == {"done"}

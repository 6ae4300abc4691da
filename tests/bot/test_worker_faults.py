"""No delivery can stop the worker: poison rows, failures by kind, attempt limits, lost leases."""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import requests
from github.GithubException import GithubException, RateLimitExceededException
from jira.exceptions import JIRAError
from sqlalchemy import Engine, update

from bot.config import Settings
from bot.effects import TicketRef
from bot.handlers.context import effect
from bot.handlers.router import Router
from bot.worker import Services, Worker, start_thread
from playbook import clock
from playbook.db import transaction
from playbook.deliveries import inbox
from playbook.models import Delivery
from tests.bot.processes import all_finished, lines, spawn_workers, stop_processes, wait_for
from tests.support import put

T0 = datetime(2026, 11, 3, 9, 0, tzinfo=UTC)


def row(engine: Engine, row_id: int) -> Delivery:
    with transaction(engine) as session:
        return session.get(Delivery, row_id)


@pytest.fixture
def handled() -> list[str]:
    return []


@pytest.fixture
def recorder(handled: list[str]) -> Router:
    router = Router()
    router.register("github", "issues")(lambda event, _: handled.append(event.delivery_id))
    return router


def worker(engine: Engine, settings: Settings, router: Router, name: str = "w1") -> Worker:
    return Worker(Services(engine=engine, settings=settings), name=name, handlers=router)


POISON = {
    "utf8-bom": '\ufeff{"action": "opened"}',
    "not-json": "{'action': 'opened'}",
    "array": "[1, 2, 3]",
    "nested": '{"a": ' + "[" * 100_000 + "]" * 100_000 + "}",
    "empty": "",
}


@pytest.mark.parametrize("payload", POISON.values(), ids=POISON.keys())
def test_a_poison_row_is_dead_with_its_reason_and_the_batch_goes_on(
    engine: Engine, settings: Settings, recorder: Router, handled: list[str], cli, payload: str
) -> None:
    poison = put(engine, payload)
    good = put(engine, '{"action": "opened"}')
    assert worker(engine, settings, recorder).run_once() == 2
    dead = row(engine, poison)
    assert (dead.status, dead.attempts, dead.error_kind) == ("dead", 1, "permanent")
    assert "stored payload" in dead.last_error
    assert "Traceback" in dead.last_traceback
    assert row(engine, good).status == "done" and len(handled) == 1
    shown = cli("deliveries", "show", str(poison))
    assert shown.exit_code == 0
    assert json.loads(shown.stdout)["status"] == "dead"
    assert "stored payload" in json.loads(shown.stdout)["last_error"]


def test_the_worker_loop_outlives_any_handler_error(
    engine: Engine, settings: Settings, handled: list[str]
) -> None:
    router = Router()

    @router.register("github", "issues")
    def fragile(event, _services) -> None:
        if event.payload.get("boom"):
            raise ZeroDivisionError("a bug in a handler")
        handled.append(event.delivery_id)

    bad = put(engine, '{"action": "opened", "boom": true}')
    put(engine, POISON["utf8-bom"])
    good = put(engine, '{"action": "opened"}')
    stop = threading.Event()
    runner = worker(engine, settings.model_copy(update={"worker_poll_seconds": 0.05}), router)
    thread = threading.Thread(target=runner.run, args=(stop,), daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while row(engine, good).status != "done" and time.monotonic() < deadline:
        time.sleep(0.05)
    assert thread.is_alive()
    stop.set()
    thread.join(timeout=10)
    failed = row(engine, bad)
    assert (failed.status, failed.error_kind) == ("failed", "unexpected")
    assert "ZeroDivisionError: a bug in a handler" in failed.last_error
    assert 'raise ZeroDivisionError("a bug in a handler")' in failed.last_traceback


# The dying thread is the point of the test; pytest reports any thread that dies.
@pytest.mark.slow
@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")
def test_serve_starts_a_new_worker_when_its_thread_dies(
    engine: Engine, settings: Settings, handled: list[str]
) -> None:
    router = Router()
    deaths = []

    @router.register("github", "issues")
    def exits_once(event, _services) -> None:
        if not deaths:
            deaths.append(event.delivery_id)
            raise SystemExit("a library called sys.exit()")  # ends the thread, not the loop
        handled.append(event.delivery_id)

    fast = settings.model_copy(
        update={"worker_poll_seconds": 0.05, "worker_lease_seconds": 1.0, "worker_batch": 1}
    )
    first = put(engine, '{"action": "opened"}')
    stop = threading.Event()
    start_thread(Services(engine=engine, settings=fast), stop, handlers=router)
    try:
        deadline = time.monotonic() + 30
        while row(engine, first).status != "done" and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        stop.set()
    # The first thread died holding the row; a new worker took it once its lease ran out.
    assert deaths == [row(engine, first).delivery_id] == handled
    assert row(engine, first).attempts == 2


# --- failures by kind --------------------------------------------------------------------


def raising(error: BaseException) -> Router:
    router = Router()

    @router.register("github", "issues")
    def fail(_event, _services) -> None:
        raise error

    return router


CASES = [
    ("github-404", GithubException(404, {"message": "Not Found"}, {}), "dead", "permanent"),
    ("github-422", GithubException(422, {"message": "Validation Failed"}, {}), "dead", "permanent"),
    ("github-401", GithubException(401, {"message": "Bad credentials"}, {}), "dead", "permanent"),
    ("github-502", GithubException(502, {"message": "Bad Gateway"}, {}), "failed", "transient"),
    ("github-409", GithubException(409, {"message": "Conflict"}, {}), "failed", "transient"),
    ("jira-404", JIRAError("Issue does not exist", status_code=404), "dead", "permanent"),
    ("jira-400", JIRAError("bad field", status_code=400), "dead", "permanent"),
    ("jira-503", JIRAError("down", status_code=503), "failed", "transient"),
    ("network", requests.ConnectionError("connection reset"), "failed", "transient"),
    ("timeout", requests.ReadTimeout("read timed out"), "failed", "transient"),
    ("bug", KeyError("surprise"), "failed", "unexpected"),
]


@pytest.mark.parametrize(
    ("error", "status", "kind"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_failures_are_classified(
    engine: Engine, settings: Settings, error: Exception, status: str, kind: str
) -> None:
    row_id = put(engine, '{"action": "opened"}')
    worker(engine, settings, raising(error)).run_once()
    failed = row(engine, row_id)
    assert (failed.status, failed.error_kind, failed.attempts) == (status, kind, 1)


def test_a_jira_error_never_stores_the_request_headers(engine: Engine, settings) -> None:
    # str(JIRAError) prints the request's headers, Authorization included.
    request = requests.Request(
        "POST", "https://jira.example/rest", headers={"Authorization": "Basic c2VjcmV0OnRva2Vu"}
    ).prepare()
    error = JIRAError("nope", status_code=404, request=request)
    row_id = put(engine, '{"action": "opened"}')
    worker(engine, settings, raising(error)).run_once()
    failed = row(engine, row_id)
    assert "c2VjcmV0OnRva2Vu" not in (failed.last_error or "") + (failed.last_traceback or "")
    assert failed.last_error == "Jira answered HTTP 404: nope"


@pytest.mark.parametrize(
    ("error", "wait"),
    [
        (
            GithubException(429, {"message": "slow down"}, {"Retry-After": "120"}),
            timedelta(seconds=120),
        ),
        (
            RateLimitExceededException(
                403,
                {"message": "API rate limit exceeded"},
                {"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": str(int(T0.timestamp()) + 600)},
            ),
            timedelta(seconds=601),
        ),
        (
            JIRAError("Too many requests", status_code=429, headers={"Retry-After": "30"}),
            timedelta(seconds=30),
        ),
    ],
    ids=["github-secondary", "github-primary", "jira"],
)
def test_a_rate_limit_waits_for_the_reset_without_counting(
    engine: Engine, settings: Settings, error: Exception, wait: timedelta
) -> None:
    with clock.frozen(T0):
        row_id = put(engine, '{"action": "opened"}')
        runner = worker(engine, settings, raising(error))
        for _ in range(settings.max_attempts + 3):  # more tries than attempts allow
            with transaction(engine) as session:
                session.execute(update(Delivery).values(next_attempt_at=T0))
            runner.run_once()
    waiting = row(engine, row_id)
    assert (waiting.status, waiting.error_kind, waiting.attempts) == ("failed", "rate_limited", 0)
    assert waiting.next_attempt_at == T0 + wait


def test_claim_never_goes_past_the_attempt_limit(engine: Engine, settings: Settings) -> None:
    lease = timedelta(seconds=30)
    with clock.frozen(T0):
        row_id = put(engine, '{"action": "opened"}')
    for attempt in range(settings.max_attempts):
        # A worker claims the row and is killed before reporting back, every time.
        with clock.frozen(T0 + attempt * 2 * lease), transaction(engine) as session:
            [claimed] = inbox.claim(
                session, f"doomed-{attempt}", lease=lease, max_attempts=settings.max_attempts
            )
            assert claimed.attempts == attempt + 1
    with clock.frozen(T0 + 20 * lease), transaction(engine) as session:
        assert inbox.claim(session, "next", lease=lease, max_attempts=settings.max_attempts) == []
    dead = row(engine, row_id)
    assert (dead.status, dead.attempts, dead.error_kind) == (
        "dead",
        settings.max_attempts,
        "unexpected",
    )
    assert "stopped before it finished" in dead.last_error


def test_only_the_lease_owner_reports_an_outcome(engine: Engine, settings: Settings) -> None:
    row_id = put(engine, '{"action": "opened"}')
    policy = inbox.RetryPolicy()
    with transaction(engine) as session:
        inbox.claim(session, "owner", lease=timedelta(minutes=5))
    with transaction(engine) as session:
        assert not inbox.complete(session, row_id, "intruder")
        assert inbox.fail(session, row_id, "intruder", "x", kind="transient", policy=policy) is None
        assert not inbox.defer(session, row_id, "intruder", T0, "busy")
        assert inbox.complete(session, row_id, "owner")
    assert row(engine, row_id).status == "done"


def test_a_worker_that_lost_its_lease_posts_nothing_more(
    engine: Engine, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    posted: list[str] = []
    router = Router()
    # The worker cannot renew (its database connection hangs, say) and its handler is slow.
    monkeypatch.setattr("bot.claims.LeaseKeeper.renew_now", lambda self: None)
    short = settings.model_copy(update={"worker_lease_seconds": 0.2})

    @router.register("github", "issues")
    def slow(event, services) -> None:
        time.sleep(0.3)  # the lease runs out ...
        with transaction(engine) as session:  # ... and another worker claims the row
            [taken] = inbox.claim(session, "other-worker", lease=timedelta(minutes=5))
            assert taken.attempts == 2
        ref = TicketRef.github("o/r", 1, None)
        effect(services, ref, "comment", lambda: posted.append("comment"))

    row_id = put(engine, '{"action": "opened"}')
    Worker(Services(engine=engine, settings=short), name="w1", handlers=router).run_once()
    assert posted == []
    taken = row(engine, row_id)
    assert (taken.status, taken.locked_by) == ("pending", "other-worker")


@pytest.mark.slow
def test_a_renewed_lease_keeps_other_workers_off(engine: Engine, settings: Settings) -> None:
    router = Router()
    short = settings.model_copy(update={"worker_lease_seconds": 0.6})
    stolen: list[int] = []

    @router.register("github", "issues")
    def slow(event, services) -> None:
        for _ in range(4):  # 1.6 s in all, over twice the lease
            time.sleep(0.4)
            with transaction(engine) as session:
                stolen.extend(d.id for d in inbox.claim(session, "other", lease=timedelta(1)))

    row_id = put(engine, '{"action": "opened"}')
    Worker(Services(engine=engine, settings=short), name="w1", handlers=router).run_once()
    assert stolen == []
    assert (row(engine, row_id).status, row(engine, row_id).attempts) == ("done", 1)


@pytest.mark.slow
def test_two_workers_with_a_handler_slower_than_the_lease_handle_each_row_once(
    engine: Engine, database_url: str, tmp_path: Path
) -> None:
    record = tmp_path / "handled.txt"
    # Each handler takes half as long again as the lease, and the second row of a batch of two
    # waits behind the first for longer still: only renewal keeps the other worker off them.
    workers = spawn_workers(
        2, database_url, record, "--sleep", "1.5", "--lease", "1", "--batch", "2"
    )
    ids = [put(engine, '{"action": "opened"}') for _ in range(4)]
    try:
        # Both workers poll until every row is done, so a lease let lapse would be taken.
        wait_for(lambda: all_finished(engine), "4 slow deliveries handled")
    finally:
        stop_processes(*workers)
    counts = Counter(line.split()[0] for line in lines(record))
    assert len(counts) == 4 and set(counts.values()) == {1}
    for row_id in ids:
        finished = row(engine, row_id)
        assert (finished.status, finished.attempts) == ("done", 1)


def test_the_retry_job_replays_only_deliveries_that_died_of_passing_trouble(
    engine: Engine, settings: Settings
) -> None:
    from bot.scheduler import retry_job

    kinds = {}
    with clock.frozen(T0):
        for kind in ("transient", "permanent", "unexpected"):
            kinds[kind] = put(engine, '{"action": "opened"}')
    with clock.frozen(T0 - timedelta(hours=80)):
        old = put(engine, '{"action": "opened"}')
    with transaction(engine) as session:
        for kind, row_id in [*kinds.items(), ("transient", old)]:
            session.execute(
                update(Delivery)
                .where(Delivery.id == row_id)
                .values(status="dead", error_kind=kind, attempts=5)
            )
    with clock.frozen(T0 + timedelta(hours=1)):
        retry_job(engine, settings)
    assert (row(engine, kinds["transient"]).status, row(engine, kinds["transient"]).attempts) == (
        "pending",
        0,
    )
    assert row(engine, kinds["permanent"]).status == "dead"
    assert row(engine, kinds["unexpected"]).status == "dead"
    assert row(engine, old).status == "dead"  # GitHub forgot it; so does the retry job

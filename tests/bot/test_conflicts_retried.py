"""A handler that lost a status race is retried, not left dead: read again, it decides afresh."""

from __future__ import annotations

import json
import uuid

from sqlalchemy import Engine, select

from bot.handlers.router import Router
from bot.outcomes import classify
from bot.services import Services
from bot.worker import CONFLICT_RERUNS, Worker
from playbook.db import transaction
from playbook.deliveries import inbox
from playbook.errors import Conflict, InvalidTransition
from playbook.models import Delivery


def test_a_lost_race_is_transient_and_a_wrong_status_is_not() -> None:
    assert classify(Conflict("pb-1 changed while this request ran")).kind == "transient"
    assert classify(InvalidTransition("pb-1 is archived")).kind == "permanent"


def _one_delivery(engine: Engine) -> None:
    with transaction(engine) as session:
        inbox.accept(
            session,
            source="github",
            event="issues",
            action="opened",
            delivery_id=str(uuid.uuid4()),
            payload=json.dumps({"action": "opened"}),
        )


def _worker_losing(engine: Engine, settings, times: int) -> tuple[Worker, list[int]]:
    runs: list[int] = []
    router = Router()

    @router.register("github", "issues")
    def racing(event, _services) -> None:
        runs.append(1)
        if len(runs) <= times:
            raise Conflict("pb-1 changed while this request ran (it is no longer proposed)")

    return Worker(Services(engine=engine, settings=settings), name="w1", handlers=router), runs


def test_a_lost_race_runs_again_at_once_and_ends_done(engine: Engine, settings) -> None:
    # Two deliveries about one lesson, in parallel lanes: the loser reads again and settles in
    # the same run, instead of waiting a backoff nobody needed.
    _one_delivery(engine)
    worker, runs = _worker_losing(engine, settings, times=CONFLICT_RERUNS)
    assert worker.run_once() == 1
    assert len(runs) == CONFLICT_RERUNS + 1
    with transaction(engine) as session:
        row = session.scalars(select(Delivery)).one()
        assert (row.status, row.attempts) == ("done", 1)


def test_a_race_lost_every_time_waits_its_backoff(engine: Engine, settings) -> None:
    _one_delivery(engine)
    worker, runs = _worker_losing(engine, settings, times=10)
    assert worker.run_once() == 1
    assert len(runs) == CONFLICT_RERUNS + 1
    with transaction(engine) as session:
        row = session.scalars(select(Delivery)).one()
        assert (row.status, row.attempts) == ("failed", 1)
        assert "no longer proposed" in (row.last_error or "")

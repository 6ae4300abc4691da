"""The world of the reflection tests: the bot in model mode, a reviewed PR, what to read back."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy import Engine, select

from bot.worker import Worker
from playbook.db import transaction
from playbook.models import Bullet, Delivery
from tests.bot.test_metrics import parse, value
from tests.e2e.test_review_proposals import _get, on_github, seed
from tests.fakes.model import FakeModel
from tests.loop_harness import REPO, Loop, start_loop

MAINTAINER = "reflection-maintainer-token"
AUTH = {"Authorization": f"Bearer {MAINTAINER}"}
PR = f"{REPO}#2"
JOB = f"reflect:{PR}"
SOURCE = "review-model"
REVIEW = "Don't call the v1 client here, it drops retries on timeouts."
LINE = "Please close the HTTP session in a finally block, we leak sockets otherwise."
AUTHORS = "Never retry inside a database transaction."  # the PR's author wrote it
BOTS = "Always pin the action versions."  # a bot wrote it
READER = "Prefer small commits over one big one."  # a reader without write access wrote it
LIVE = "Log the request id on every error response."  # an active lesson of the playbook


@contextmanager
def model_server() -> Iterator[FakeModel]:
    """A fake model server, up for the test."""
    server = FakeModel()
    server.start()
    try:
        yield server
    finally:
        server.stop()


@contextmanager
def model_mode(engine: Engine, database_url: str, model: FakeModel, **more: Any) -> Iterator[Loop]:
    """The whole bot in model mode, asking the fake model."""
    running = start_loop(
        engine,
        database_url,
        PLAYBOOK_CAPTURE_FROM_REVIEWS="model",
        PLAYBOOK_MODEL_BASE_URL=model.base_url,
        PLAYBOOK_MODEL="test-model",
        PLAYBOOK_MODEL_API_KEY="model-key",
        PLAYBOOK_MODEL_TIMEOUT_SECONDS=5,
        PLAYBOOK_API_TOKEN=MAINTAINER,
        **more,
    )
    try:
        yield running
    finally:
        running.github.stop()
        running.jira.stop()


def model_worker(loop: Loop) -> Worker:
    return Worker(loop.worker.services, name="model-worker", queue="model")


@contextmanager
def logged(name: str = "bot.handlers.model_jobs") -> Iterator[list[str]]:
    """The messages ``name`` logs meanwhile."""
    lines: list[str] = []

    class Handler(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            lines.append(record.getMessage())

    handler = Handler(logging.INFO)
    logger = logging.getLogger(name)
    level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        yield lines
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


def lessons(*pairs: tuple[str, str]) -> dict[str, Any]:
    """The model's answer: each (lesson, quote)."""
    return {"lessons": [{"lesson": lesson, "quote": quote} for lesson, quote in pairs]}


def reflect(loop: Loop) -> list[str]:
    """The model's worker until no job is due (it takes one at a time); the handlers' log lines."""
    worker = model_worker(loop)
    with logged() as lines:
        while worker.run_once():
            pass
    return lines


def proposed(engine: Engine) -> list[dict[str, Any]]:
    """The lessons proposed by the model from review feedback, oldest first."""
    with transaction(engine) as session:
        rows = session.scalars(
            select(Bullet).where(Bullet.source == SOURCE).order_by(Bullet.number)
        )
        return [
            {
                "id": b.id,
                "text": b.text,
                "status": b.status,
                "learned_from": b.learned_from,
                "scope": b.scope,
                "source_url": b.source_url,
            }
            for b in rows
        ]


def job(engine: Engine) -> Delivery:
    with transaction(engine) as session:
        row = session.scalars(select(Delivery).where(Delivery.delivery_id == JOB)).one()
        session.expunge(row)
        return row


def said(line_start: str, lines: list[str]) -> str:
    [line] = [line for line in lines if line.startswith(line_start)]
    return line


def feedback_sent(request: dict[str, Any]) -> str:
    """The text between the <feedback> markers of a reflection request."""
    user = request["messages"][-1]["content"]
    assert user.count("<feedback>") == 1 and user.count("</feedback>") == 1
    return user.split("<feedback>", 1)[1].split("</feedback>", 1)[0]


def outcome_stands(engine: Engine) -> None:
    """The close's outcome: pb-1, cited by the closed PR, demoted with its failed cite."""
    cited = _get(engine, "pb-1")
    assert (cited.status, cited.cites_failure) == ("deprecated", 1)


def quotes_dropped(loop: Loop) -> float:
    answer = loop.client.get("/metrics", headers=AUTH)
    assert answer.status_code == 200, answer.get_data(as_text=True)
    return value(parse(answer.get_data(as_text=True)), "playbook_model_quotes_dropped_total")


def a_reviewed_pull(loop: Loop) -> tuple[dict[str, Any], dict[str, Any]]:
    """PR 2 with a writer's (alice's) review and line comment, and feedback that never counts."""
    seed(loop.engine)
    on_github(loop)
    loop.github.permissions[(REPO, "drive-by")] = "read"
    review = loop.github.add_review(REPO, 2, REVIEW, "alice")
    line = loop.github.add_review_comment(REPO, 2, LINE, "alice")
    loop.github.add_review(REPO, 2, AUTHORS, "coding-agent")
    loop.github.add_comment(REPO, 2, BOTS, "ci-helper[bot]")
    loop.github.add_review(REPO, 2, "Avoid global state in handlers.", "renovate", user_type="Bot")
    loop.github.add_review_comment(REPO, 2, READER, "drive-by")
    return review, line

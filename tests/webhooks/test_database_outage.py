"""Faults: with the database down every door answers 503 without saying where the database is,
and a command that could not be applied is retried, never marked done or answered wrongly."""

from __future__ import annotations

import json
import logging
import sqlite3
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import psycopg
import pytest
from flask import request
from sqlalchemy import Engine, event, select

from bot.config import Settings
from bot.logs import configure_logging
from playbook import clock
from playbook.db import transaction
from playbook.lessons import lifecycle
from playbook.models import Delivery
from tests.loop_harness import REPO, Loop
from tests.payloads import fixture_body, issue_comment
from tests.support import GITHUB_SECRET, JIRA_SECRET
from webhooks import create_app
from webhooks.signatures import sign

# A server nobody listens on, with a user and a password that must never be shown.
DOWN_URL = "postgresql+psycopg://ledger_owner:hunter2-s3cret@127.0.0.1:1/ledger"
LEAKS = ("ledger_owner", "hunter2-s3cret", "127.0.0.1:1", "postgresql+psycopg://")


@pytest.fixture
def down(settings: Settings):
    return create_app(settings.model_copy(update={"database_url": DOWN_URL})).test_client()


@pytest.fixture
def stderr_logs(capsys: pytest.CaptureFixture[str]) -> Iterator[Any]:
    """The process's real log output (the production formatter, secrets scrubbed)."""
    root = logging.getLogger()
    saved = (root.handlers[:], root.level)
    configure_logging("INFO", "text", [DOWN_URL])
    try:
        yield lambda: capsys.readouterr().err
    finally:
        root.handlers[:] = saved[0]
        root.setLevel(saved[1])


def requests_while_down(client) -> list[Any]:
    github_body = fixture_body("issues.opened")
    jira_body = fixture_body("jira.issue_created")
    auth = {"Authorization": "Bearer agent-token"}
    return [
        client.post(
            "/webhooks/github",
            data=github_body,
            headers={
                "X-GitHub-Event": "issues",
                "X-GitHub-Delivery": "d-1",
                "X-Hub-Signature-256": sign(GITHUB_SECRET, github_body),
            },
            content_type="application/json",
        ),
        client.post(
            "/webhooks/jira",
            data=jira_body,
            headers={"X-Hub-Signature": sign(JIRA_SECRET, jira_body)},
            content_type="application/json",
        ),
        client.get("/api/v1/bullets/pb-1", headers=auth),
        client.post(
            "/api/v1/usage",
            json={"event": "loaded", "lessonIds": ["pb-1"], "ticketId": "CTMS-1"},
            headers=auth,
        ),
        client.get("/readyz"),
    ]


def test_every_door_answers_503_without_naming_the_database(down, stderr_logs) -> None:
    for response in requests_while_down(down):
        assert response.status_code == 503, response.request.path
        body = response.get_json()
        if response.request.path.startswith("/api/"):
            # The agent API answers RFC 9457 problems.
            assert response.mimetype == "application/problem+json"
            assert body["status"] == 503 and body["detail"]
        else:
            assert body["status"] == "error" and body["message"]
        for leak in LEAKS:
            assert leak not in json.dumps(body), (response.request.path, leak)
    logged = stderr_logs()
    assert "database unavailable" in logged or "cannot store delivery" in logged
    for leak in LEAKS:
        assert leak not in logged
    assert down.get("/healthz").status_code == 200


def test_cli_errors_name_the_setting_not_the_url(cli, monkeypatch) -> None:
    monkeypatch.setenv("PLAYBOOK_DATABASE_URL", DOWN_URL)
    result = cli("list")
    assert result.exit_code == 2
    assert "PLAYBOOK_DATABASE_URL" in result.output and "connection refused" in result.output
    for leak in LEAKS:
        assert leak not in result.output


class Outage:
    """Makes every statement on an engine fail as a lost server does, until it ends."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.on = False
        event.listen(engine, "before_cursor_execute", self._statement)

    def _statement(self, conn, cursor, statement, parameters, context, executemany) -> None:
        if not self.on:
            return
        if self.engine.dialect.name == "postgresql":
            raise psycopg.OperationalError(
                'connection to server at "10.0.0.7", port 5432 failed: server closed the '
                'connection unexpectedly for user "ledger_owner"'
            )
        raise sqlite3.OperationalError("disk I/O error")

    def close(self) -> None:
        event.remove(self.engine, "before_cursor_execute", self._statement)


@pytest.fixture
def outage(engine: Engine) -> Iterator[Outage]:
    fault = Outage(engine)
    yield fault
    fault.close()


def test_a_command_during_an_outage_is_retried_not_done(loop: Loop, outage: Outage) -> None:
    with transaction(loop.engine) as session:
        lifecycle.add(session, "A lesson", learned_from="x/y#1", scope=REPO, actor="seed")
    loop.github.add_issue(REPO, 1, "Spelling error")
    loop.github.permissions[(REPO, "lead")] = "admin"

    seen_permission_checks: list[int] = []

    @loop.github.app.before_request
    def _cut_database_once() -> None:
        # The permission check succeeds; by the time the command is applied the database
        # is gone (once: the second attempt finds it back).
        if request.path.endswith("/collaborators/lead/permission"):
            seen_permission_checks.append(1)
            if len(seen_permission_checks) == 1:
                outage.on = True

    payload = issue_comment("/playbook deprecate pb-1 superseded", "lead")
    loop.github_event("issue_comment.created", payload)
    assert loop.worker.run_once() == 1
    outage.on = False
    with transaction(loop.engine) as session:
        row = session.scalars(select(Delivery)).one()
        assert row.status == "pending" and row.locked_by == "test-worker"  # not done
    with transaction(loop.engine) as session:
        assert lifecycle.get(session, "pb-1").status == "active"
    assert loop.github.comments_on(REPO, 1) == []  # nothing was said about the outage
    # The lease runs out; the delivery is tried again and the command carried out once.
    with clock.frozen(clock.now() + timedelta(seconds=loop.settings.worker_lease_seconds + 1)):
        loop.process()
    with transaction(loop.engine) as session:
        row = session.scalars(select(Delivery)).one()
        assert (row.status, row.attempts) == ("done", 2)
        assert lifecycle.get(session, "pb-1").status == "deprecated"
    [reply] = loop.github.comments_on(REPO, 1)
    assert "pb-1 is now deprecated" in reply["body"]
    for leak in ("10.0.0.7", "ledger_owner", "disk I/O", "database"):
        assert leak not in reply["body"]

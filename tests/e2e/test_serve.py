"""`playbook-bot serve` and `worker` as real processes: a delivery goes in and gets processed."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from sqlalchemy import Engine, select

from playbook import db
from playbook.db import transaction
from playbook.models import Delivery
from tests.bot.processes import wait_for
from tests.payloads import fixture_body
from tests.serve_process import clean_env, console, free_port, request
from tests.support import GITHUB_SECRET, wait_until_up
from webhooks.signatures import sign

pytestmark = pytest.mark.slow


@pytest.fixture
def served(tmp_path: Path):
    port = free_port()
    env = clean_env() | {
        "GITHUB_WEBHOOK_SECRET": GITHUB_SECRET,
        "PLAYBOOK_WORKER_POLL_SECONDS": "0.1",
        "LOG_FORMAT": "json",
    }
    process = subprocess.Popen(
        [*console(), "serve", "--port", str(port)],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until_up(url, process)
        yield url, tmp_path, env
    finally:
        process.terminate()
        _out, err = process.communicate(timeout=30)
        (tmp_path / "server.log").write_text(err)


def test_serve_receives_and_processes_on_the_sqlite_default(served) -> None:
    url, cwd, env = served
    body = fixture_body("issues.opened")
    headers = {
        "Content-Type": "application/json",
        "X-GitHub-Event": "issues",
        "X-GitHub-Delivery": "serve-1",
        "X-Hub-Signature-256": sign(GITHUB_SECRET, body),
    }
    assert request(f"{url}/webhooks/github", body, headers) == (
        202,
        {"status": "accepted", "delivery": "serve-1"},
    )
    assert request(f"{url}/webhooks/github", body, headers)[1]["status"] == "duplicate"
    status, ready = request(f"{url}/readyz")
    assert (status, ready["status"], ready["workers"]) == (200, "ok", 1)
    bad = dict(headers, **{"X-Hub-Signature-256": sign("wrong", body)})
    assert request(f"{url}/webhooks/github", body, bad)[0] == 401
    assert (cwd / "playbook.db").exists()  # serve made the default database where it ran
    # Polled in-process (a CLI process per poll costs a second of start-up); the CLI then
    # reads the same default database from the same directory once.
    engine = db.make_engine(f"sqlite:///{cwd / 'playbook.db'}")
    try:
        wait_for(lambda: _status(engine, "serve-1") == "done", "serve processed the delivery")
    finally:
        engine.dispose()
    listing = subprocess.run(
        [*console(), "deliveries", "list", "--json"],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    rows = json.loads(listing.stdout)
    assert [(row["delivery_id"], row["status"]) for row in rows] == [("serve-1", "done")]


def _status(engine: Engine, delivery_id: str) -> str | None:
    """The stored status of a delivery, or None before it is stored."""
    with transaction(engine) as session:
        return session.scalar(select(Delivery.status).where(Delivery.delivery_id == delivery_id))

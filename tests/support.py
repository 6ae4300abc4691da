"""Helpers shared by tests: paths, the secrets deliveries are signed with, servers, inbox rows.

Payloads themselves are built in tests/payloads.py."""

from __future__ import annotations

import json
import signal
import subprocess
import threading
import time
import urllib.request
import uuid
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, select
from werkzeug.serving import BaseWSGIServer, make_server

from playbook.db import transaction
from playbook.deliveries import inbox
from playbook.deliveries.tickets import ticket_key
from playbook.models import Delivery
from playbook.search.retrieval import Hit

TESTS = Path(__file__).parent
ROOT = TESTS.parent
FIXTURES = TESTS / "fixtures"
DATA = TESTS / "data"
GITHUB_SECRET = "It's a Secret to Everybody"
JIRA_SECRET = "jira-webhook-secret"


def put(engine: Engine, payload: str, event: str = "issues", action: str = "opened", **kw) -> int:
    """Store an inbox row as it is, the way an older receiver (or a person) could have, with
    its ticket told as migration 0009 tells the rows stored before it."""
    with suppress(ValueError, RecursionError):
        kw.setdefault("ticket_key", ticket_key("github", json.loads(payload)))
    with transaction(engine) as session:
        inbox.accept(
            session,
            source="github",
            event=event,
            action=action,
            delivery_id=str(uuid.uuid4()),
            payload=payload,
            **kw,
        )
        return session.scalars(select(Delivery.id).order_by(Delivery.id.desc())).first()


# serve_forever only sees a shutdown request between two waits on its socket, and werkzeug
# waits 0.5 s by default: every stop paid up to that (minutes over the suite). A short wait
# makes stopping immediate; an idle server then wakes 50 times a second, which costs nothing.
SHUTDOWN_POLL_SECONDS = 0.02


def start_serving(app: Any, **options: Any) -> tuple[BaseWSGIServer, threading.Thread]:
    """Serve a WSGI app with werkzeug on a free local port in a thread (``options`` go to
    ``make_server``); stop it with ``stop_serving``."""
    server = make_server("127.0.0.1", 0, app, threaded=True, **options)
    thread = threading.Thread(
        target=server.serve_forever,
        kwargs={"poll_interval": SHUTDOWN_POLL_SECONDS},
        daemon=True,
    )
    thread.start()
    return server, thread


def stop_serving(server: BaseWSGIServer, thread: threading.Thread) -> None:
    """Stop a server from ``start_serving``: its loop, its socket and its thread."""
    server.shutdown()
    server.server_close()
    thread.join()


@contextmanager
def serving(app: Any) -> Iterator[str]:
    """Serve a WSGI app with werkzeug on a free local port; yields its base URL."""
    server, thread = start_serving(app)
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        stop_serving(server, thread)


@contextmanager
def hang_guard(seconds: float, what: str) -> Iterator[None]:
    """Fail the test when the block is still running after ``seconds``: a guard against a hang
    (a pattern that backtracks runs for minutes), never a speed claim, so set it many times what
    the work takes on a busy machine; benches measure speed.

    SIGALRM interrupts Python code and the ``re`` engine (which checks for signals as it
    matches); off the main thread, or without SIGALRM, the block runs unguarded."""
    import pytest

    if threading.current_thread() is not threading.main_thread() or not hasattr(signal, "SIGALRM"):
        yield
        return

    def hung(_signum: int, _frame: Any) -> None:
        pytest.fail(f"{what} was still running after {seconds:g} s", pytrace=False)

    previous = signal.signal(signal.SIGALRM, hung)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def wait_until_up(url: str, process: subprocess.Popen, seconds: float = 30) -> None:
    """Wait until a server process started by a test answers ``/healthz``, or fail saying why."""
    import pytest

    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if process.poll() is not None:
            stderr = process.stderr.read() if process.stderr else ""
            pytest.fail(f"server exited with {process.returncode}: {stderr}")
        try:
            with urllib.request.urlopen(f"{url}/healthz", timeout=5) as answer:
                if answer.status == 200:
                    return
        except OSError:
            time.sleep(0.1)
    pytest.fail("server did not come up")


def last_delivery(engine: Engine, event: str) -> Delivery:
    """The newest inbox row of ``event`` (``issues``, ``pull_request_review``), detached."""
    with transaction(engine) as session:
        row = session.scalars(
            select(Delivery).where(Delivery.event == event).order_by(Delivery.id.desc())
        ).first()
        assert row is not None
        session.expunge(row)
        return row


def saw(engine: Engine, *tickets: str) -> None:
    """Make the bot have seen ``tickets`` (as a signed Jira delivery would)."""
    from playbook.outcomes import seen_tickets

    with transaction(engine) as session:
        for ticket in tickets:
            seen_tickets.saw(session, ticket, "jira")


def hit(text: str, learned_from: str | None = "CTMS-1", confidence: float = 0.5) -> Hit:
    """A ranked lesson pb-1 with ``text``, as the comment renderers receive one."""
    return Hit(
        bullet_id="pb-1",
        text=text,
        rank=1,
        score=1.0,
        learned_from=learned_from,
        scope="CTMS",
        tags=(),
        cites=0,
        cites_success=0,
        cites_failure=0,
        bm25=1.0,
        multiplier=1.0,
        confidence=confidence,
    )

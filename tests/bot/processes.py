"""Worker processes for the tests that need more than one: started from worker_process.py,
stopped once what the test waits for has happened."""

from __future__ import annotations

import os
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path
from subprocess import DEVNULL, PIPE, Popen

import pytest
from sqlalchemy import Engine, func, select

from playbook.db import transaction
from playbook.models import Delivery
from tests.support import ROOT

# Catches a hang, never a slow machine: what the tests wait for takes seconds even under load.
GUARD_SECONDS = 120


def start_worker(database_url: str, record: Path, *args: str) -> Popen:
    """Start a worker process recording what it handles in ``record`` (``args`` as
    worker_process.py takes them); ``ready`` waits until it can work."""
    script = Path(__file__).with_name("worker_process.py")
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return Popen(
        [sys.executable, str(script), database_url, str(record), *args],
        env=env,
        stdin=PIPE if "--gate" in args else DEVNULL,
        stdout=PIPE,
        text=True,
    )


def ready(*processes: Popen) -> None:
    """Wait until every worker process has imported the bot and can work."""
    for process in processes:
        assert process.stdout is not None
        line = process.stdout.readline().strip()
        process.stdout.close()  # the script prints nothing after "ready"
        assert line == "ready"


def spawn_workers(count: int, database_url: str, record: Path, *args: str) -> list[Popen]:
    """Start ``count`` worker processes side by side (each spends a second or more importing
    the bot); returns once every one is ready."""
    processes = [start_worker(database_url, record, *args) for _ in range(count)]
    ready(*processes)
    return processes


def spawn_worker(database_url: str, record: Path, *args: str) -> Popen:
    """Start one worker process; returns once it is ready."""
    [process] = spawn_workers(1, database_url, record, *args)
    return process


def let_work(process: Popen) -> None:
    """Open the gate of a worker process started with ``--gate``."""
    assert process.stdin is not None
    process.stdin.write("go\n")
    process.stdin.close()


def stop_workers(*processes: Popen) -> None:
    """Ask worker processes to stop (each finishes its batch in hand) and check each exited 0."""
    for process in processes:
        process.send_signal(signal.SIGTERM)
    for process in processes:
        assert process.wait(timeout=GUARD_SECONDS) == 0


def wait_for(condition: Callable[[], bool], what: str, seconds: float = GUARD_SECONDS) -> None:
    """Poll ``condition`` until it holds; fail naming ``what`` if it still does not after
    ``seconds`` (a hang guard, not a speed claim)."""
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"{what}: still not so after {seconds:g} s")
        time.sleep(0.02)


def lines(record: Path) -> list[str]:
    """The lines a worker process recorded so far (none before its first delivery)."""
    return record.read_text().splitlines() if record.exists() else []


def all_finished(engine: Engine) -> bool:
    """Whether every delivery in the inbox has its outcome: none pending (a claimed one is
    pending too) or failed."""
    with transaction(engine) as session:
        left = session.scalar(
            select(func.count()).where(Delivery.status.in_(("pending", "failed")))
        )
    return not left

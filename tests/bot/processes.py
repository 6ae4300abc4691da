"""Processes for the tests that need more than one: workers (worker_process.py), job loops
(scheduler_process.py) and commands (cli_process.py), started side by side and stopped once
what the test waits for happened.

Each is a process of its own (its own engine and connections, killed as any process would be),
forked from multiprocessing's fork server, which imports the bot once for the whole session: a
fresh interpreter would spend a second or more importing it for every process.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, func, select

from playbook.db import transaction
from playbook.models import Delivery

# Catches a hang, never a slow machine: what the tests wait for takes seconds even under load.
GUARD_SECONDS = 120

_CONTEXT = multiprocessing.get_context("forkserver")
# The server starts with the first process a test asks for, in that moment's environment and
# working directory, which every later process shares: the tests that start processes change
# neither. "__main__" too: pytest's entry script, imported once there instead of in each child.
# Named, not imported: a test module that only polls (wait_for) does not import the bot.
_CONTEXT.set_forkserver_preload(
    ["__main__", "tests.bot.worker_process", "tests.bot.scheduler_process", "tests.bot.cli_process"]
)


@dataclass
class Child:
    """A process started by ``start_process``, and the test's end of its pipe."""

    process: BaseProcess
    pipe: Connection

    @property
    def pid(self) -> int:
        """The process id (the worker records it beside each delivery it handles)."""
        assert self.process.pid is not None
        return self.process.pid


def start_process(body: Callable[..., None], *args: Any) -> Child:
    """Start a process running ``body(pipe, *args)``; ``ready`` waits until it says so."""
    mine, theirs = _CONTEXT.Pipe()
    process = _CONTEXT.Process(target=body, args=(theirs, *args), daemon=True)
    process.start()
    theirs.close()
    return Child(process, mine)


def ready(*children: Child) -> None:
    """Wait until every process has said it is ready (it can work at once)."""
    for child in children:
        if not child.pipe.poll(GUARD_SECONDS):
            pytest.fail(f"process {child.pid} not ready after {GUARD_SECONDS} s")
        try:
            said = child.pipe.recv()
        except EOFError:
            child.process.join(GUARD_SECONDS)
            pytest.fail(f"process {child.pid} exited ({child.process.exitcode}) before ready")
        assert said == "ready"


def go(*children: Child) -> None:
    """Open the gate of processes waiting for the word (a worker started with ``--gate``)."""
    for child in children:
        child.pipe.send("go")


def kill(child: Child) -> None:
    """SIGKILL, as a crash or the OOM killer would: no chance to finish or let go of anything."""
    os.kill(child.pid, signal.SIGKILL)
    child.process.join(GUARD_SECONDS)
    assert child.process.exitcode == -signal.SIGKILL
    child.pipe.close()


def finish(*children: Child) -> None:
    """Wait for processes that end by themselves, and check each exited 0."""
    for child in children:
        child.process.join(GUARD_SECONDS)
        assert child.process.exitcode == 0, f"process {child.pid}: {child.process.exitcode}"
        child.pipe.close()


def stop_processes(*children: Child) -> None:
    """Ask processes to stop (a worker finishes its batch in hand), and check each exited 0."""
    for child in children:
        if child.process.is_alive():
            os.kill(child.pid, signal.SIGTERM)
    finish(*children)


def start_worker(database_url: str, record: Path, *args: str) -> Child:
    """Start a worker process recording what it handles in ``record`` (``args`` as
    worker_process.py takes them); ``ready`` waits until it can work."""
    from tests.bot import worker_process

    return start_process(worker_process.run, database_url, str(record), *args)


def start_cli(environment: dict[str, str], directory: Path, *args: str) -> Child:
    """Start `playbook-bot ARGS` in ``environment`` (all of it: nothing else of this process's)
    and ``directory``; it says nothing on its pipe."""
    from tests.bot import cli_process

    return start_process(cli_process.run, environment, str(directory), *args)


def spawn_workers(count: int, database_url: str, record: Path, *args: str) -> list[Child]:
    """Start ``count`` worker processes side by side; returns once every one is ready."""
    workers = [start_worker(database_url, record, *args) for _ in range(count)]
    with reaping_on_failure(*workers):
        ready(*workers)
    return workers


@contextmanager
def reaping_on_failure(*children: Child) -> Iterator[None]:
    """SIGKILL whatever of ``children`` still runs if the block fails: a test that fails half-way
    must not leave a worker behind to take the next test's deliveries."""
    try:
        yield
    except BaseException:
        for child in children:
            if child.process.is_alive():
                kill(child)
        raise


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

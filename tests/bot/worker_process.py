"""A worker process for tests: records each delivery it handles in a file, optionally slowly.

tests/bot/processes.py starts it (``run`` is the process's body) with arguments as on a
command line: `DATABASE_URL RECORD_FILE [--sleep S] [--lease S] [--batch N] [--lanes N]
[--gate] [--limit S]`. It says "ready" on its pipe once it can work (with --gate it then waits
for a word on the pipe, so a test can start it beside another and let it work later), and
works until SIGTERM (it finishes the batch in hand, then exits 0) or, as a guard against a test
that never stops it, --limit seconds. The test stops it when what it waits for has happened,
so no test waits out an idle timeout.
"""

from __future__ import annotations

import argparse
import os
import signal
import threading
import time
from multiprocessing.connection import Connection

from bot.config import Settings
from bot.handlers.router import Router
from bot.worker import Services, Worker
from playbook import db


def run(pipe: Connection, *argv: str) -> None:
    """Run one worker until told to stop."""
    parser = argparse.ArgumentParser()
    parser.add_argument("database_url")
    parser.add_argument("record_file")
    parser.add_argument("--sleep", type=float, default=0.0)
    parser.add_argument("--lease", type=float, default=300.0)
    parser.add_argument("--batch", type=int, default=5)
    parser.add_argument("--lanes", type=int, default=None)
    parser.add_argument("--limit", type=float, default=120.0)
    parser.add_argument("--gate", action="store_true")
    args = parser.parse_args(list(argv))

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda _signum, _frame: stop.set())
    handlers = Router()

    @handlers.register("github", "issues")
    def record(event, _services) -> None:
        time.sleep(args.sleep)
        # One short O_APPEND write per line: lines from two processes never interleave.
        line = f"{event.delivery_id} {os.getpid()}\n".encode()
        fd = os.open(args.record_file, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
        try:
            os.write(fd, line)
        finally:
            os.close(fd)

    settings = Settings(
        PLAYBOOK_DATABASE_URL=args.database_url,
        PLAYBOOK_WORKER_LEASE_SECONDS=args.lease,
        PLAYBOOK_WORKER_BATCH=args.batch,
        _env_file=None,
    )
    # Its own engine and connections, as any worker process has.
    engine = db.make_engine(args.database_url)
    worker = Worker(Services(engine=engine, settings=settings), handlers=handlers, lanes=args.lanes)
    pipe.send("ready")
    if args.gate:
        pipe.recv()
    deadline = time.monotonic() + args.limit
    while not stop.is_set() and time.monotonic() < deadline:
        if not worker.run_once():
            stop.wait(0.02)

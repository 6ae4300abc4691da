"""A worker process for tests: records each delivery it handles in a file, optionally slowly.

Run as `python tests/worker_process.py DATABASE_URL RECORD_FILE [--sleep S] [--lease S]`; it
exits once the inbox has been empty for --idle seconds after its first delivery (or after two
minutes without any), so a slow start of a second worker never makes the first one give up.
"""

from __future__ import annotations

import argparse
import os
import time

from bot.config import Settings
from bot.handlers.router import Router
from bot.worker import Services, Worker
from playbook import db


def main() -> None:
    """Run one worker until the inbox stays empty."""
    parser = argparse.ArgumentParser()
    parser.add_argument("database_url")
    parser.add_argument("record_file")
    parser.add_argument("--sleep", type=float, default=0.0)
    parser.add_argument("--lease", type=float, default=300.0)
    parser.add_argument("--idle", type=float, default=2.0)
    parser.add_argument("--batch", type=int, default=5)
    parser.add_argument("--lanes", type=int, default=None)
    args = parser.parse_args()

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
    engine = db.make_engine(args.database_url)
    worker = Worker(Services(engine=engine, settings=settings), handlers=handlers, lanes=args.lanes)
    started = time.monotonic()
    idle_since: float | None = None
    print("ready", flush=True)
    while True:
        if worker.run_once():
            idle_since = time.monotonic()
            continue
        if idle_since is None and time.monotonic() - started > 120:
            break
        if idle_since is not None and time.monotonic() - idle_since >= args.idle:
            break
        time.sleep(0.05)


if __name__ == "__main__":
    main()

"""A process that tries to run a scheduled job repeatedly and logs when it ran (for tests).

tests/bot/processes.py starts it (``run`` is the process's body) with the arguments
`DATABASE_URL LOG_FILE ROUNDS [unlocked]`. It says "ready" on its pipe once it can run, then
waits for the word, so the processes of a test begin their rounds together; `unlocked` runs the
job without the lock, to show that the test sees overlaps when there are.
"""

from __future__ import annotations

import os
import time
from multiprocessing.connection import Connection

from bot.scheduler import run_exclusively
from playbook import db


def run(pipe: Connection, url: str, log_file: str, rounds: str, *extra: str) -> None:
    """Try the job ``rounds`` times; each run logs start and end times."""
    unlocked = extra == ("unlocked",)
    engine = db.make_engine(url)
    holder = f"proc-{os.getpid()}"

    def work() -> None:
        start = time.time()
        time.sleep(0.05)
        line = f"{holder} {start:.6f} {time.time():.6f}\n".encode()
        fd = os.open(log_file, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
        try:
            os.write(fd, line)
        finally:
            os.close(fd)

    pipe.send("ready")
    pipe.recv()
    for _ in range(int(rounds)):
        if unlocked:
            work()
        else:
            run_exclusively(engine, "prune", holder, work)
        time.sleep(0.01)

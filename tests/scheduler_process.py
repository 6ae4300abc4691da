"""A process that tries to run a scheduled job repeatedly and logs when it ran (for tests).

Run as `python tests/scheduler_process.py DATABASE_URL LOG_FILE ROUNDS`.
"""

from __future__ import annotations

import os
import sys
import time

from bot.scheduler import run_exclusively
from playbook import db


def main() -> None:
    """Try the job ROUNDS times; each run logs start and end times."""
    url, log_file, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3])
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

    for _ in range(rounds):
        run_exclusively(engine, "prune", holder, work)
        time.sleep(0.01)


if __name__ == "__main__":
    main()

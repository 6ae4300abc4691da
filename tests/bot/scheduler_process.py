"""A process that tries to run a scheduled job repeatedly and logs when it ran (for tests).

Run as `python tests/scheduler_process.py DATABASE_URL LOG_FILE ROUNDS START_AT [unlocked]`:
every process waits for the same START_AT (epoch seconds), so they really run side by side;
`unlocked` runs the job without the lock, to show that the test sees overlaps when there are.
"""

from __future__ import annotations

import os
import sys
import time

from bot.scheduler import run_exclusively
from playbook import db


def main() -> None:
    """Try the job ROUNDS times; each run logs start and end times."""
    url, log_file, rounds, start_at = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
    unlocked = sys.argv[5:] == ["unlocked"]
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

    time.sleep(max(start_at - time.time(), 0))
    for _ in range(rounds):
        if unlocked:
            work()
        else:
            run_exclusively(engine, "prune", holder, work)
        time.sleep(0.01)


if __name__ == "__main__":
    main()

"""A process that tries to run a scheduled job repeatedly and logs when it ran (for tests).

Run as `python scheduler_process.py DATABASE_URL LOG_FILE ROUNDS [unlocked]`: it prints "ready"
once everything is imported, then waits for a line on stdin, so the processes of a test begin
their rounds together, however long each took to start; `unlocked` runs the job without the
lock, to show that the test sees overlaps when there are.
"""

from __future__ import annotations

import os
import sys
import time

from playbook import db


def main() -> None:
    """Try the job ROUNDS times; each run logs start and end times."""
    url, log_file, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3])
    unlocked = sys.argv[4:] == ["unlocked"]
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

    if not unlocked:
        # Imported only here: the unlocked control needs none of the bot, so it starts sooner.
        from bot.scheduler import run_exclusively
    print("ready", flush=True)
    sys.stdin.readline()
    for _ in range(rounds):
        if unlocked:
            work()
        else:
            run_exclusively(engine, "prune", holder, work)
        time.sleep(0.01)
    # Every run is logged (os.write, unbuffered): skip the interpreter's teardown of the
    # modules the bot imported, which takes most of a second.
    os._exit(0)


if __name__ == "__main__":
    main()

"""`playbook-bot ARGS` in a process of its own, for tests/bot/processes.py to start.

The command runs as the console script runs it, in the environment and directory it is given;
its output goes nowhere, as a service's would without a log collector.
"""

from __future__ import annotations

import os
from multiprocessing.connection import Connection

# Imported here so that the fork server imports them once: `main`, and the worker behind the
# `worker` command, which the command itself loads on use.
import bot.worker  # noqa: F401
from bot.cli import main


def run(_pipe: Connection, environment: dict[str, str], directory: str, *args: str) -> None:
    """Run the command; the process exits with its exit code."""
    os.environ.clear()
    os.environ.update(environment)
    os.chdir(directory)
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.dup2(devnull, 2)
    main(list(args), prog_name="playbook-bot")

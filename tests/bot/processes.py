"""Worker processes for the tests that need more than one: started from worker_process.py."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.support import ROOT


def spawn_worker(database_url: str, record: Path, *args: str) -> subprocess.Popen:
    """Start a worker process recording what it handles in ``record``; returns once it is
    ready (``args`` as worker_process.py takes them)."""
    script = Path(__file__).with_name("worker_process.py")
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    process = subprocess.Popen(
        [sys.executable, str(script), database_url, str(record), *args],
        env=env,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    ready = process.stdout.readline().strip()
    process.stdout.close()  # the script prints nothing after "ready"
    assert ready == "ready"
    return process

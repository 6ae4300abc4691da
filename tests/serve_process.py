"""`playbook-bot serve` and its commands as real processes: start, wait, call, stop.

Shared by the end-to-end tests that run the bot as a user runs it (tests/e2e/test_serve*.py,
test_demo_served.py, test_serve_anchors.py)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tests.support import wait_until_up


def console(name: str = "playbook-bot") -> list[str]:
    """The words that start the bot's command line (its script, else ``python -m bot``)."""
    script = Path(sys.executable).with_name(name)
    return [str(script)] if script.exists() else [sys.executable, "-m", "bot"]


def free_port() -> int:
    """A loopback port nothing listens on right now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def clean_env() -> dict[str, str]:
    """This process's environment without any setting of the bot's own."""
    return {k: v for k, v in os.environ.items() if not k.startswith(("PLAYBOOK_", "GITHUB_"))}


def request(
    url: str,
    body: bytes | None = None,
    headers: dict[str, str] | None = None,
    method: str | None = None,
) -> tuple[int, Any]:
    """One HTTP call; its status and its JSON answer (the text when it is not JSON)."""
    req = urllib.request.Request(
        url, data=body, headers=headers or {}, method=method or ("POST" if body else "GET")
    )
    try:
        with urllib.request.urlopen(req, timeout=30) as response:
            status, raw = response.status, response.read()
    except urllib.error.HTTPError as error:
        status, raw = error.code, error.read()
    try:
        return status, json.loads(raw)
    except ValueError:
        return status, raw.decode("utf-8", "replace")


@contextmanager
def serving(cwd: Path, env: dict[str, str], *args: str) -> Iterator[str]:
    """`playbook-bot serve` run in ``cwd`` until the block ends; yields its base URL.

    Its log (stderr) is kept in ``cwd/server.log`` for a failing test to show."""
    port = free_port()
    log = (cwd / "server.log").open("a")
    process = subprocess.Popen(
        [*console(), "serve", "--port", str(port), *args],
        cwd=cwd,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=log,
        text=True,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until_up(url, process)
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=30)
        finally:
            log.close()


def run_cli(cwd: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    """One `playbook-bot` command in ``cwd``, as a person types it; never raises on its exit."""
    return subprocess.run(
        [*console(), *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )

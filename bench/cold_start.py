"""Cold start: wall times of fresh `playbook-bot` processes (a first search, `--help`)."""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

from playbook.search.text import Ticket

ROOT = Path(__file__).resolve().parents[1]
# Upper bounds, so a slow build still finishes the default run in minutes.
COLD_BUDGET_S = 60.0
COLD_TIMEOUT_S = 900


def command() -> list[str]:
    """How to run the CLI: the installed console script, else `python -m bot`."""
    script = Path(sys.executable).with_name("playbook-bot")
    if script.exists():
        return [str(script)]
    found = shutil.which("playbook-bot")
    return [found] if found else [sys.executable, "-m", "bot"]


def wall(
    args: list[str], env: dict[str, str], runs: int, budget: float, least: int = 1
) -> tuple[list[float], str]:
    """Wall times of ``least`` to ``runs`` fresh processes, more while within ``budget`` s.

    Also returns the last one's stdout.
    """
    times: list[float] = []
    out = ""
    started = time.perf_counter()
    while len(times) < runs and (len(times) < least or time.perf_counter() - started < budget):
        t0 = time.perf_counter()
        done = subprocess.run(
            args, env=env, capture_output=True, text=True, check=False, timeout=COLD_TIMEOUT_S
        )
        times.append(time.perf_counter() - t0)
        if done.returncode != 0:
            raise SystemExit(f"{' '.join(args[:2])} failed: {done.stderr.strip()[-500:]}")
        out = done.stdout
    return times, out


def cli_env(url: str | None = None) -> dict[str, str]:
    """The environment of a CLI subprocess: this one, the bench database, quiet logs."""
    env = {**os.environ, "LOG_LEVEL": "WARNING", "PYTHONPATH": str(ROOT)}
    if url:
        env["PLAYBOOK_DATABASE_URL"] = url
    return env


def cold_search_row(url: str, query: Ticket, scope: str) -> dict:
    """Wall times of fresh `playbook-bot search` processes on the bench database.

    The first process may find no saved index and build one; later ones may load what it
    saved. Both are reported: the first is a playbook's first search after a bulk fill.
    """
    body = f"{query.summary}\n{(query.description or '')[:500]}"
    args = [*command(), "search", body, "--scope", scope, "-k", "5", "--json"]
    times, out = wall(args, cli_env(url), runs=3, budget=COLD_BUDGET_S, least=2)
    hits = len(json.loads(out)["results"])
    later = times[1:] or times
    return {
        "cold_first_s": round(times[0], 2),
        "cold_search_s": round(statistics.median(later), 2),
        "runs": len(times),
        "hits": hits,
    }


def startup_rows() -> dict:
    """`playbook-bot --help` and the bare interpreter, five fresh processes each."""
    help_times, _ = wall([*command(), "--help"], cli_env(), runs=5, budget=30)
    python_times, _ = wall([sys.executable, "-c", "pass"], cli_env(), runs=5, budget=30)
    return {
        "help_s": round(statistics.median(help_times), 3),
        "python_s": round(statistics.median(python_times), 3),
    }

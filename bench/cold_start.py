"""Cold start: every everyday command as a fresh process, beside an earlier commit, same run.

Usage: python bench/cold_start.py [--lessons 20000] [--runs 3] [--baseline aae1dac]

Fills a SQLite playbook with --lessons generated lessons (bench/import_speed.py's, seed 14) by
`playbook-bot import`, once per run on a fresh file, then times fresh processes of `--help`,
`show pb-1`, `list --status proposed`, `add` (a new text each time) and `search`, each after one
untimed warm-up. Each row runs this checkout and --baseline (the commit before the holdout
experiment by default, extracted with `git archive` into a temporary folder) in turn, A B A B,
with the same interpreter and packages, each on a playbook of its own: the ratio holds when the
machine's speed drifts. Reports the median wall and CPU seconds of --runs processes and the
goal of each row (issue 39), and the floor under every command that opens the playbook: a process
that only imports click, pydantic-settings and SQLAlchemy's ORM and opens a SQLite connection.
Prints a table on stderr and ends with one JSON line.

The helpers below are also used by bench/retrieval_speed.py and bench/experiment_scale.py.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from playbook.search.text import Ticket  # noqa: E402

# The last commit before the holdout experiment (issue 39's "before" column).
BASELINE = "aae1dac"
# Each row's goal in wall seconds on a quiet machine (issue 39).
GOALS = {
    "import": 5.0,
    "--help": 0.15,
    "show": 0.5,
    "list": 0.5,
    "add": 0.5,
    "search": 1.0,
}
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


# --- the side-by-side bench ---------------------------------------------------------------------


def extract(commit: str, folder: Path) -> Path:
    """The source of ``commit`` of this repository, extracted into ``folder``."""
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", "--format=tar", commit],
        capture_output=True,
        check=True,
        timeout=300,
    ).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(folder, filter="data")
    return folder


def timed(args: list[str], env: dict[str, str], cwd: Path) -> tuple[float, float, str]:
    """Wall and CPU seconds (user + system) of one process, and its stdout; it must succeed."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(
        args, env=env, cwd=cwd, capture_output=True, text=True, check=False, timeout=COLD_TIMEOUT_S
    )
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(args[2:5])} failed: {done.stderr.strip()[-500:]}")
    return wall, cpu, done.stdout


class Version:
    """One side of the comparison: a source tree and a playbook database of its own."""

    def __init__(self, name: str, tree: Path, folder: Path) -> None:
        self.name = name
        self.tree = tree
        self.folder = folder
        self.database = folder / f"{name}.db"
        folder.mkdir(parents=True, exist_ok=True)
        # Bytecode is written (by the warm-up), as `pip install` writes it for a user: a
        # PYTHONDONTWRITEBYTECODE inherited here would compile every module on every start.
        inherited = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        self.env = {
            **inherited,
            "PYTHONPATH": str(tree),
            "PLAYBOOK_DATABASE_URL": f"sqlite:///{self.database}",
            "LOG_LEVEL": "WARNING",
        }

    def run(self, *args: str) -> tuple[float, float, str]:
        """One fresh `playbook-bot ARGS` process of this version (in its own folder: no .env)."""
        return timed([sys.executable, "-m", "bot", *args], self.env, self.folder)


def measure(
    versions: list[Version], runs: int, name: str, args_of: Any, fresh: Any = None
) -> dict[str, Any]:
    """``runs`` timed processes per version after one untimed warm-up, the versions in turn."""
    times: dict[str, list[tuple[float, float]]] = {v.name: [] for v in versions}
    for attempt in range(runs + 1):
        for version in versions:
            if fresh is not None:
                fresh(version)
            wall, cpu, _ = version.run(*args_of(version, attempt))
            if attempt:  # the first is the warm-up
                times[version.name].append((wall, cpu))
    row: dict[str, Any] = {"command": name}
    for version in versions:
        walls = [w for w, _ in times[version.name]]
        cpus = [c for _, c in times[version.name]]
        row[version.name] = {
            "wall_s": round(statistics.median(walls), 3),
            "cpu_s": round(statistics.median(cpus), 3),
            "runs": len(walls),
        }
    log(f"  {name:<28} " + "  ".join(f"{v.name} {row[v.name]['wall_s']:>7.3f} s" for v in versions))
    return row


# What every command that opens the playbook imports before any code of ours runs: the floor
# under `show`, `list` and `add`, whichever commit.
FLOOR = (
    "import click, pydantic_settings, sqlalchemy.orm\n"
    "from sqlalchemy import create_engine\n"
    "create_engine('sqlite://').connect().close()"
)


def library_floor(version: Version, runs: int) -> dict[str, Any]:
    """Median wall and CPU seconds of a process that only imports the libraries and connects."""
    times = [
        timed([sys.executable, "-c", FLOOR], version.env, version.folder) for _ in range(runs + 1)
    ]
    walls = [wall for wall, _, _ in times[1:]]
    cpus = [cpu for _, cpu, _ in times[1:]]
    return {
        "wall_s": round(statistics.median(walls), 3),
        "cpu_s": round(statistics.median(cpus), 3),
        "runs": len(walls),
    }


def log(message: str) -> None:
    """A progress line on stderr."""
    print(message, file=sys.stderr, flush=True)


def main() -> None:
    """Every command of both versions, side by side; the table, then one JSON line."""
    import import_speed
    import machine

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lessons", type=int, default=20_000)
    parser.add_argument("--runs", type=int, default=3, help="timed processes per row and side")
    parser.add_argument("--baseline", default=BASELINE, help="commit to compare with")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="pbcold-") as tmp:
        folder = Path(tmp)
        log(f"writing {args.lessons:,} generated lessons, extracting {args.baseline} ...")
        lessons = import_speed.write_files(folder, args.lessons)["jsonl"]
        sample = next(import_speed.lessons(1234))
        words = sample["text"].split()[:6]
        baseline = Version(
            "baseline", extract(args.baseline, folder / "baseline-src"), folder / "b"
        )
        current = Version("current", ROOT, folder / "c")
        versions = [baseline, current]

        def fresh_database(version: Version) -> None:
            version.database.unlink(missing_ok=True)

        rows = [
            measure(
                versions,
                args.runs,
                f"import {args.lessons:,} lessons",
                lambda v, n: ["import", str(lessons)],
                fresh=fresh_database,
            ),
            measure(versions, args.runs, "--help", lambda v, n: ["--help"]),
            measure(versions, args.runs, "show pb-1", lambda v, n: ["show", "pb-1"]),
            measure(
                versions,
                args.runs,
                "list --status proposed",
                lambda v, n: ["list", "--status", "proposed"],
            ),
            measure(
                versions,
                args.runs,
                "add",
                lambda v, n: [
                    "add",
                    f"Rotate the staging credentials after drill {n} of the {v.name} run",
                    "--learned-from",
                    f"OPS-{n + 1}",
                ],
            ),
            measure(versions, args.runs, "search", lambda v, n: ["search", " ".join(words)]),
        ]
        floor = library_floor(current, args.runs)

    goals = dict(zip([row["command"] for row in rows], GOALS.values(), strict=True))
    log("")
    log(f"{'command':<28} {'baseline s':>10} {'current s':>10} {'ratio':>6} {'goal s':>7}  cpu s")
    for row in rows:
        before, now = row["baseline"]["wall_s"], row["current"]["wall_s"]
        row["ratio"] = round(now / before, 2) if before else None
        row["goal_s"] = goals[row["command"]]
        row["within_goal"] = now <= row["goal_s"]
        log(
            f"{row['command']:<28} {before:>10.3f} {now:>10.3f} {row['ratio']:>6} "
            f"{row['goal_s']:>7}  {row['baseline']['cpu_s']:.3f} / {row['current']['cpu_s']:.3f}"
        )
    log(
        f"{'floor: the libraries alone':<28} {'':>10} {floor['wall_s']:>10.3f} {'':>6} {'':>7}  "
        f"{floor['cpu_s']:.3f} (click, pydantic-settings, SQLAlchemy's ORM, a SQLite connection)"
    )
    print(
        json.dumps(
            {
                "bench": "cold_start",
                "machine": machine.describe(None),
                "baseline": args.baseline,
                "lessons": args.lessons,
                "rows": rows,
                "floor": floor,
            }
        )
    )


if __name__ == "__main__":
    main()

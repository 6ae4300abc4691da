"""`playbook-bot import-rules` on a rule file of 96,354 short list items (~990 KB, under the 1 MB
cap), beside a small one: the seconds of each run, their ratio, and the report's summary.

Usage: python bench/import_rules_speed.py [--items 96354] [--small 1000] [--bytes 990000]
           [--database-url postgresql+psycopg://user@host/db]

The file is what the third hardening round fed the command: one `- word word` item a line,
every item distinct, two made-up words of 3 or 4 letters (deterministic, seed 9), about
--bytes long. Each
run is `playbook-bot import-rules FILE --json` in a fresh process on a fresh playbook (a SQLite
file, or with --database-url a PostgreSQL schema of its own, dropped afterwards), then the
same file again (everything is a near-duplicate: the second run's report says so) and once
with --dry-run. Before the fix, 2,000 items took 35 s and 96,354 did not finish in 600 s.

Prints a table on stderr and ends with one JSON line (machine, command, wall and CPU seconds,
ratio). On a shared machine the CPU seconds are the command's own cost.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import machine
from sqlalchemy import text
from sqlalchemy.engine import make_url

from playbook import db

SEED = 9
_CONSONANTS, _VOWELS = "bcdfghklmnprstvz", "aeiou"


def log(message: str) -> None:
    """A progress line on stderr."""
    print(message, file=sys.stderr, flush=True)


def rule_file(items: int, size: int | None, seed: int = SEED) -> bytes:
    """A rule file of ``items`` distinct items of two made-up words (7 or 8 characters: 10 or
    11 bytes a line), padded with blank lines at the end to ``size`` bytes when given."""
    rng = random.Random(seed)
    short = [a + b + c for a in _CONSONANTS for b in _VOWELS for c in _CONSONANTS]
    # The share of items one byte longer that brings the file nearest ``size`` unpadded.
    longer = 0.0 if size is None else min(1.0, max(0.0, (size - 10 * items - 16) / items))
    seen: set[str] = set()
    lines = ["# Rules", ""]
    while len(seen) < items:
        second = rng.choice(short) + (rng.choice(_VOWELS) if rng.random() < longer else "")
        item = f"{rng.choice(short)} {second}"
        if item not in seen:
            seen.add(item)
            lines.append(f"- {item}")
    data = ("\n".join(lines) + "\n").encode()
    if size is not None and len(data) < size:
        data += b"\n" * (size - len(data))
    return data


def fresh_database(base: str | None, folder: Path) -> tuple[str, Any]:
    """A database URL of an empty playbook, and a function that drops it."""
    if base is None:
        path = folder / f"{uuid.uuid4().hex}.db"
        return f"sqlite:///{path}", lambda: path.unlink(missing_ok=True)
    schema = f"bench_{uuid.uuid4().hex[:12]}"
    engine = db.make_engine(base)
    with engine.begin() as connection:
        connection.execute(text(f'CREATE SCHEMA "{schema}"'))
    url = make_url(base).update_query_dict({"options": f"-csearch_path={schema}"})
    migrated = db.make_engine(url.render_as_string(hide_password=False))
    db.upgrade(migrated)  # SQLite creates its schema at first use; PostgreSQL is migrated
    migrated.dispose()

    def drop() -> None:
        with engine.begin() as connection:
            connection.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))
        engine.dispose()

    return url.render_as_string(hide_password=False), drop


def _children_cpu() -> float:
    """CPU seconds (user and system) of this process's finished children so far."""
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def run(path: Path, database_url: str, *extra: str) -> tuple[float, float, dict[str, Any]]:
    """Wall and CPU seconds of one `import-rules` process, and its JSON report.

    CPU seconds are kept beside wall-clock ones: on a machine shared with other work the
    wall clock says more about the neighbours than about the command."""
    command = [sys.executable, "-m", "bot", "import-rules", str(path), "--json", *extra]
    env = {**os.environ, "PLAYBOOK_DATABASE_URL": database_url, "PLAYBOOK_ACTOR": "bench"}
    cpu, started = _children_cpu(), time.monotonic()
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    seconds, cpu = time.monotonic() - started, _children_cpu() - cpu
    if done.returncode != 0:
        raise SystemExit(f"import-rules failed ({done.returncode}): {done.stderr.strip()}")
    return seconds, cpu, json.loads(done.stdout)


def measure(path: Path, base: str | None, folder: Path) -> dict[str, Any]:
    """A first import, the same file again, and a dry run, on one fresh playbook."""
    url, drop = fresh_database(base, folder)
    try:
        first, first_cpu, report = run(path, url)
        again, again_cpu, second = run(path, url)
        dry, dry_cpu, _ = run(path, url, "--dry-run")
    finally:
        drop()
    return {
        "items": len(report["added"]) + len(report["near_duplicates"]) + len(report["skipped"]),
        "bytes": path.stat().st_size,
        "seconds": round(first, 2),
        "cpu_seconds": round(first_cpu, 2),
        "again_seconds": round(again, 2),
        "again_cpu_seconds": round(again_cpu, 2),
        "dry_run_seconds": round(dry, 2),
        "dry_run_cpu_seconds": round(dry_cpu, 2),
        "summary": report["summary"],
        "again_summary": second["summary"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=96_354)
    parser.add_argument("--small", type=int, default=1_000)
    parser.add_argument("--bytes", type=int, default=990_000)
    parser.add_argument("--database-url", default=None)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="import-rules-bench-") as temporary:
        folder = Path(temporary)
        rows: dict[str, dict[str, Any]] = {}
        for name, items, size in (
            ("small", args.small, None),
            ("large", args.items, args.bytes),
        ):
            path = folder / name / "AGENTS.md"
            path.parent.mkdir()
            path.write_bytes(rule_file(items, size))
            log(f"{name}: {items:,} items, {path.stat().st_size:,} bytes")
            rows[name] = measure(path, args.database_url, folder)
            row = rows[name]
            log(
                f"  first {row['seconds']} s ({row['cpu_seconds']} s CPU), "
                f"again {row['again_seconds']} s ({row['again_cpu_seconds']} s CPU), "
                f"dry run {row['dry_run_seconds']} s ({row['dry_run_cpu_seconds']} s CPU)"
            )
            log(f"  {row['summary']}")
    small, large = rows["small"], rows["large"]
    ratio = large["cpu_seconds"] / max(small["cpu_seconds"], 1e-9)
    per_item = (large["cpu_seconds"] - small["cpu_seconds"]) / max(args.items - args.small, 1)
    log(
        f"large/small: {ratio:.1f}x the CPU time for {args.items / args.small:.0f}x the items "
        f"({per_item * 1e6:.0f} µs of CPU per extra item)"
    )
    print(
        json.dumps(
            {
                "bench": "import_rules_speed",
                "machine": machine.describe(args.database_url),
                "command": "playbook-bot import-rules FILE --json (fresh process each)",
                "database": "postgresql" if args.database_url else "sqlite",
                "small": small,
                "large": large,
                "cpu_ratio": round(ratio, 2),
                "cpu_per_extra_item_us": round(per_item * 1e6, 1),
            }
        )
    )


if __name__ == "__main__":
    main()

"""Import and export speed at 100k lessons, with the peak memory of each run.

Usage: python bench/import_speed.py [--lessons 100000] [--small 10000] [--adds 1000]
           [--database-url postgresql+psycopg://user@host/db]

Generates lessons (deterministic, seed 14: sentences over a 6,000-word made-up vocabulary, tags,
tickets, a few deprecated) into files in a temporary folder, then runs each measurement in a
fresh process on a fresh playbook (a SQLite file, or with --database-url a PostgreSQL schema of
its own, dropped afterwards), so each peak RSS is that run's alone:

1. baseline, the database's floor: the JSONL file parsed and its bullets and revisions inserted
   with bulk `INSERT`s (no checks, no dedup), the fastest any import could write them;
2. baseline, one `lifecycle.add` per lesson (what a script calling `add` in a loop, or the old
   import, pays per entry) for the first --adds lessons;
3. `playbook-bot import`'s code path (`import_file`) of a JSONL export (ids and every field),
   at --small and at --lessons lessons: the peak RSS of the two shows whether memory grows with
   the file; then the same file again (everything already there);
4. the same lessons as a YAML export, and as a team's JSONL without ids (each entry matched by
   text, then checked for near-duplicates, then numbered);
5. a file with one bad entry at the end: the time to refuse it, writing nothing;
6. `export` of the imported playbook as JSONL and as YAML.

Prints a table on stderr and ends with one JSON line.
"""

from __future__ import annotations

import argparse
import itertools
import json
import random
import resource
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import machine
from sqlalchemy import func, insert, select, text
from sqlalchemy.engine import make_url

from playbook import db
from playbook.lessons import lifecycle
from playbook.models import Bullet, Revision
from playbook.transfer.export import write_bullets
from playbook.transfer.imports import import_file
from playbook.transfer.reports import ImportRefused

SEED = 14
SCOPES = ("CTMS", "PAY", "acme/shop", "global")


def log(message: str) -> None:
    """A progress line on stderr."""
    print(message, file=sys.stderr, flush=True)


def peak_rss_mb() -> float:
    """This process's peak resident memory in MB (Linux reports kilobytes)."""
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


# --- generated lessons -----------------------------------------------------------------------


def vocabulary(rng: random.Random, size: int = 6000) -> list[str]:
    """Made-up words, so lessons share words the way real ones do without being near-duplicates."""
    consonants, vowels = "bcdfghklmnprstvz", "aeiou"
    words: set[str] = set()
    while len(words) < size:
        syllables = rng.randint(1, 4)
        words.add("".join(rng.choice(consonants) + rng.choice(vowels) for _ in range(syllables)))
    return sorted(words)


def lessons(count: int, seed: int = SEED) -> Iterator[dict[str, Any]]:
    """``count`` export-shaped lessons, `pb-1` upwards."""
    rng = random.Random(seed)
    words = vocabulary(rng)
    # Zipf-like: a few words everywhere, a long tail of rare ones.
    weights = list(itertools.accumulate(1 / (rank + 1) ** 1.05 for rank in range(len(words))))
    start = datetime(2024, 1, 1, tzinfo=UTC)
    for n in range(1, count + 1):
        length = rng.randint(8, 40)
        body = " ".join(rng.choices(words, cum_weights=weights, k=length)).capitalize()
        created = start + timedelta(minutes=n * 7 + rng.randint(0, 6))
        deprecated = rng.random() < 0.05
        scope = rng.choice(SCOPES)
        yield {
            "id": f"pb-{n}",
            "text": f"{body} (lesson {n}).",
            "tags": rng.sample(words[:200], rng.randint(0, 3)),
            "learned_from": f"{'CTMS' if scope == 'global' else scope}-{rng.randint(1, 99999)}"
            if "/" not in scope
            else f"{scope}#{rng.randint(1, 9999)}",
            "deprecated": deprecated,
            "demoted_on": (created + timedelta(days=30)).isoformat() if deprecated else None,
            "demoted_reason": "pr_closed_unmerged" if deprecated else None,
            "section": rng.choice(("best_practice", "error_resolution")),
            "scope": scope,
            "status": "deprecated" if deprecated else "active",
            "source": "import",
            "source_url": None,
            "created_at": created.isoformat(),
            "updated_at": created.isoformat(),
        }


def write_files(folder: Path, count: int) -> dict[str, Path]:
    """The lessons as JSONL and YAML exports, and as a team's JSONL without ids."""
    import yaml

    dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
    paths = {
        "jsonl": folder / f"export-{count}.jsonl",
        "yaml": folder / f"export-{count}.yaml",
        "team": folder / f"team-{count}.jsonl",
    }
    with (
        paths["jsonl"].open("w") as jsonl,
        paths["yaml"].open("w") as yml,
        paths["team"].open("w") as team,
    ):
        for record in lessons(count):
            jsonl.write(json.dumps(record) + "\n")
            yml.write(yaml.dump([record], Dumper=dumper, sort_keys=False, width=100))
            team.write(
                json.dumps({k: record[k] for k in ("text", "tags", "learned_from", "scope")}) + "\n"
            )
    return paths


# --- playbooks -------------------------------------------------------------------------------


@contextmanager
def playbook(server_url: str | None) -> Iterator[str]:
    """The URL of an empty, migrated playbook: a SQLite file, or a PostgreSQL schema."""
    if not server_url:
        with tempfile.TemporaryDirectory(prefix="pbimport-") as folder:
            url = f"sqlite:///{folder}/bench.db"
            engine = db.make_engine(url)
            db.ensure_schema(engine)
            engine.dispose()
            yield url
        return
    schema = f"pbimport_{uuid.uuid4().hex[:12]}"
    admin = db.make_engine(server_url)
    with admin.begin() as connection:
        connection.execute(text(f'CREATE SCHEMA "{schema}"'))
    url = make_url(server_url).update_query_dict({"options": f"-csearch_path={schema}"})
    rendered = url.render_as_string(hide_password=False)
    engine = db.make_engine(rendered)
    try:
        db.upgrade(engine)
        engine.dispose()
        yield rendered
    finally:
        with admin.begin() as connection:
            connection.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))
        admin.dispose()


# --- what a child process measures -----------------------------------------------------------


def child_import(url: str, path: Path, times: int) -> dict[str, Any]:
    """Import ``path`` ``times`` times, each timed; a refused file is timed too."""
    engine = db.make_engine(url)
    runs = []
    for _ in range(times):
        started = time.perf_counter()
        try:
            with db.transaction(engine) as session:
                report = import_file(session, path, actor="bench")
            outcome = report.summary()
        except ImportRefused as refused:
            outcome = f"refused: {refused.problems[0]}"
        runs.append({"seconds": round(time.perf_counter() - started, 2), "outcome": outcome})
    with db.transaction(engine) as session:
        stored = session.scalar(select(func.count()).select_from(Bullet))
    return {"runs": runs, "stored": stored, "peak_rss_mb": peak_rss_mb()}


def child_floor(url: str, path: Path) -> dict[str, Any]:
    """The JSONL file parsed and bulk-inserted with one revision each: the database's own speed."""
    engine = db.make_engine(url)
    started = time.perf_counter()
    batch: list[dict[str, Any]] = []
    with path.open() as lines:
        for line in lines:
            batch.append(json.loads(line))
            if len(batch) == 1000:
                _insert(engine, batch)
                batch = []
    _insert(engine, batch)
    return {"seconds": round(time.perf_counter() - started, 2), "peak_rss_mb": peak_rss_mb()}


def _insert(engine: Any, records: list[dict[str, Any]]) -> None:
    if not records:
        return
    now = datetime.now(UTC)
    bullets, revisions = [], []
    for record in records:
        when = datetime.fromisoformat(record["created_at"])
        bullets.append(
            {
                "id": record["id"],
                "number": int(record["id"][3:]),
                "text": record["text"],
                "section": record["section"],
                "tags": record["tags"],
                "scope": record["scope"],
                "learned_from": record["learned_from"],
                "source": "import",
                "status": record["status"],
                "created_at": when,
                "updated_at": when,
                "loads": 0,
                "cites": 0,
                "cites_success": 0,
                "cites_failure": 0,
                "version": 1,
            }
        )
        revisions.append(
            {
                "bullet_id": record["id"],
                "action": "import",
                "actor": "bench",
                "at": now,
                "after": {k: record[k] for k in ("text", "scope", "status")},
            }
        )
    with db.transaction(engine) as session:
        session.execute(insert(Bullet), bullets)
        session.execute(insert(Revision), revisions)


def child_adds(url: str, path: Path, count: int) -> dict[str, Any]:
    """One `lifecycle.add` per lesson of the file's first ``count``, each its own transaction."""
    engine = db.make_engine(url)
    with path.open() as lines:
        records = [json.loads(line) for line, _ in zip(lines, range(count), strict=False)]
    started = time.perf_counter()
    for record in records:
        with db.transaction(engine) as session:
            lifecycle.add(
                session,
                record["text"],
                learned_from=record["learned_from"],
                actor="bench",
                tags=record["tags"],
                scope=record["scope"],
            )
    return {"seconds": round(time.perf_counter() - started, 2), "peak_rss_mb": peak_rss_mb()}


def child_export(url: str, path: Path, fmt: str) -> dict[str, Any]:
    """Import ``path`` untimed, then time exporting the playbook to a file."""
    engine = db.make_engine(url)
    with db.transaction(engine) as session:
        import_file(session, path, actor="bench")
    rss_after_import = peak_rss_mb()
    out = path.with_name(f"out.{fmt}")
    started = time.perf_counter()
    with db.transaction(engine) as session, out.open("w") as stream:
        count = write_bullets(session, stream, fmt)  # type: ignore[arg-type]
    seconds = time.perf_counter() - started
    return {
        "seconds": round(seconds, 2),
        "count": count,
        "bytes": out.stat().st_size,
        "peak_rss_mb_after_import": rss_after_import,
        "peak_rss_mb": peak_rss_mb(),
    }


def run_child(*args: str) -> dict[str, Any]:
    """Run one measurement in a fresh interpreter; its last stdout line is its JSON result."""
    done = subprocess.run(
        [sys.executable, __file__, "--child", *args],
        check=True,
        capture_output=True,
        text=True,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


# --- the bench -------------------------------------------------------------------------------


def rate(count: int, seconds: float) -> int:
    """Rows per second, rounded."""
    return round(count / seconds) if seconds else 0


def main() -> None:
    """Run every measurement and print the table and the JSON line."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lessons", type=int, default=100_000)
    parser.add_argument("--small", type=int, default=10_000)
    parser.add_argument("--adds", type=int, default=1_000)
    parser.add_argument("--database-url", default=None)
    parser.add_argument("--skip-team", action="store_true", help="skip the file without ids")
    parser.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        kind, *rest = args.child
        if kind == "import":
            result = child_import(rest[0], Path(rest[1]), int(rest[2]))
        elif kind == "floor":
            result = child_floor(rest[0], Path(rest[1]))
        elif kind == "adds":
            result = child_adds(rest[0], Path(rest[1]), int(rest[2]))
        else:
            result = child_export(rest[0], Path(rest[1]), rest[2])
        print(json.dumps(result))
        return

    database = "postgresql" if args.database_url else "sqlite"
    n, small = args.lessons, args.small
    rows: list[dict[str, Any]] = []

    def row(name: str, count: int, result: dict[str, Any], seconds: float) -> None:
        entry = {
            "run": name,
            "lessons": count,
            "seconds": seconds,
            "rows_per_s": rate(count, seconds),
        }
        entry |= {k: v for k, v in result.items() if k not in ("seconds", "runs")}
        rows.append(entry)
        log(
            f"  {name}: {count:,} in {seconds:.1f} s = {rate(count, seconds):,}/s, "
            f"peak RSS {result['peak_rss_mb']} MB"
        )

    with tempfile.TemporaryDirectory(prefix="pbimport-files-") as folder:
        log(f"writing {n:,} and {small:,} generated lessons ...")
        files = write_files(Path(folder), n)
        small_files = write_files(Path(folder), small)
        bad = Path(folder) / f"bad-{n}.jsonl"
        with files["jsonl"].open() as good, bad.open("w") as out:
            out.writelines(good)
            out.write(json.dumps({"text": "no ticket named"}) + "\n")
        log(f"measuring on {database} ...")
        with playbook(args.database_url) as url:
            result = run_child("floor", url, str(files["jsonl"]))
            row("baseline: bulk INSERT, no checks", n, result, result["seconds"])
        with playbook(args.database_url) as url:
            result = run_child("adds", url, str(files["jsonl"]), str(args.adds))
            row("baseline: one lifecycle.add per lesson", args.adds, result, result["seconds"])
        with playbook(args.database_url) as url:
            result = run_child("import", url, str(small_files["jsonl"]), "1")
            row("import JSONL export", small, result, result["runs"][0]["seconds"])
        with playbook(args.database_url) as url:
            result = run_child("import", url, str(files["jsonl"]), "2")
            first, again = result["runs"]
            row("import JSONL export", n, result, first["seconds"])
            row("import the same JSONL again (all unchanged)", n, result, again["seconds"])
            rows[-1]["outcome"] = again["outcome"]
        with playbook(args.database_url) as url:
            result = run_child("import", url, str(files["yaml"]), "1")
            row("import YAML export", n, result, result["runs"][0]["seconds"])
        if not args.skip_team:
            with playbook(args.database_url) as url:
                result = run_child("import", url, str(files["team"]), "1")
                row(
                    "import team JSONL without ids (dedup by text)",
                    n,
                    result,
                    result["runs"][0]["seconds"],
                )
                rows[-1]["outcome"] = result["runs"][0]["outcome"]
        with playbook(args.database_url) as url:
            result = run_child("import", url, str(bad), "1")
            row(
                "refuse JSONL with one bad entry at the end",
                n + 1,
                result,
                result["runs"][0]["seconds"],
            )
            rows[-1]["outcome"] = result["runs"][0]["outcome"]
        for fmt in ("jsonl", "yaml"):
            with playbook(args.database_url) as url:
                result = run_child("export", url, str(files["jsonl"]), fmt)
                row(f"export {fmt.upper()}", n, result, result["seconds"])

    target = next(r for r in rows if r["run"] == "import JSONL export" and r["lessons"] == n)
    summary = {
        "bench": "import_speed",
        "database": database,
        "machine": machine.describe(args.database_url),
        "lessons": n,
        "rows": rows,
        "goal_100k_import_within_180s": target["seconds"] <= 180 if n >= 100_000 else None,
    }
    log("")
    log(f"{'run':<48} {'lessons':>8} {'seconds':>8} {'rows/s':>8} {'peak RSS MB':>11}")
    for entry in rows:
        log(
            f"{entry['run']:<48} {entry['lessons']:>8,} {entry['seconds']:>8.1f} "
            f"{entry['rows_per_s']:>8,} {entry['peak_rss_mb']:>11}"
        )
    print(json.dumps(summary))


if __name__ == "__main__":
    main()

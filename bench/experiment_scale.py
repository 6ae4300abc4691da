"""The experiment report's speed at scale, and what the held-out check costs a delivery.

Usage: python bench/experiment.py --scale [--tickets 100000] [--events 1000000] [--repeat 7]
           [--database-url postgresql+psycopg://user@host/db] [DATASET] [--generated]

On a fresh SQLite file, and with --database-url also on a PostgreSQL schema of its own (dropped
afterwards), it fills a playbook in bulk: 2,000 lessons from the dataset (`bulk.put_many`, as an
import writes them), ``--tickets`` experiment tickets at 10% held out (arms from the product's
keyed hash), 5 would-have-shown or shown exposures each, a `loaded` event for each lesson a shown
ticket got (as `retrieval.record_shown` writes it) and loads of searches without a ticket up to
``--events`` load and exposure rows in all; 90% of tickets have a pull request (linked as a
Jira key) whose outcome `outcomes.refresh` stores. Then, ``--repeat`` times each, in the same
run: `report.build` in a transaction of its own, `playbook-bot experiment --json` as a new
process and `GET /api/v1/experiment` (Flask's test client, maintainer token) when they exist,
beside baselines on the same database: `SELECT count(*)` over the exposures, `upkeep.stats` (the
`stats` report), `playbook-bot stats --json` and `GET /api/v1/stats`. The machine is shared and
noisy, so the ratios to the baselines say more than the milliseconds.

The held-out check: `holdout.enroll` of a new ticket, `holdout.arm_for` of an enrolled one, and
`Retriever.search` of a dataset ticket (the search every comment's delivery makes), 200 calls
each on the full database, p50 and p90. Ends with one JSON line.
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
from sqlalchemy import Engine, func, insert, select, text, update
from sqlalchemy.engine import make_url
from sqlalchemy.orm import Session

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import datasets  # noqa: E402
import machine  # noqa: E402
from cold_start import command  # noqa: E402

from playbook import clock, db, upkeep  # noqa: E402
from playbook.experiment import assignment, holdout, outcomes, report  # noqa: E402
from playbook.lessons import bulk  # noqa: E402
from playbook.models import (  # noqa: E402
    Bullet,
    ExperimentAssignment,
    ExperimentExposure,
    ExperimentPeriod,
    PullRequest,
    SeenTicket,
    TicketLink,
    UsageEvent,
)
from playbook.outcomes import usage  # noqa: E402
from playbook.search import retrieval  # noqa: E402

# Rows a bulk insert sends per statement: well under SQLite's 32,766 bound parameters.
CHUNK = 2_000
LESSONS = 2_000
PER_TICKET = 5
PERCENT = 10
SALT = "bench-scale"
TOKEN = "bench-maintainer-token"
CALLS = 200
CONSUMER = "playbook-bot"
START = datetime(2024, 1, 1, tzinfo=UTC)


def log(message: str) -> None:
    """Progress on stderr, so stdout is the tables and the JSON line."""
    print(message, file=sys.stderr, flush=True)


@contextmanager
def scratch_database(server_url: str | None, name: str) -> Iterator[tuple[Engine, str]]:
    """An empty playbook: a SQLite file in a temporary folder, or a fresh PostgreSQL schema
    (dropped afterwards); yields the engine and the URL a subprocess can use."""
    if not server_url:
        with tempfile.TemporaryDirectory(prefix=f"pb{name}-") as folder:
            url = f"sqlite:///{folder}/{name}.db"
            engine = db.make_engine(url)
            db.ensure_schema(engine)
            try:
                yield engine, url
            finally:
                retrieval.forget_shared()
                clock.reset()
                engine.dispose()
        return
    schema = f"pbbench_{uuid.uuid4().hex[:12]}"
    admin = db.make_engine(server_url)
    with admin.begin() as connection:
        connection.execute(text(f'CREATE SCHEMA "{schema}"'))
    # search_path in the URL makes a subprocess (the CLI rows) use the schema too.
    url = make_url(server_url).update_query_dict({"options": f"-csearch_path={schema}"})
    rendered = url.render_as_string(hide_password=False)
    engine = db.make_engine(rendered)
    try:
        db.upgrade(engine)
        yield engine, rendered
    finally:
        retrieval.forget_shared()
        clock.reset()
        engine.dispose()
        with admin.begin() as connection:
            connection.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))
        admin.dispose()


def scratch_copies(url: str, count: int) -> list[str]:
    """``count`` copies of a SQLite playbook beside it (the SQLite backup API, so nothing
    half-written is copied); a PostgreSQL schema is shared, its tasks run one at a time."""
    if not url.startswith("sqlite"):
        return [url] * count
    path = Path(url.removeprefix("sqlite:///"))
    made = []
    with sqlite3.connect(path) as source:
        for i in range(count):
            target = path.with_name(f"{path.stem}-{i}.db")
            with sqlite3.connect(target) as copy:
                source.backup(copy)
            made.append(f"sqlite:///{target}")
    return made


def bulk_insert(engine: Engine, table: Any, rows: list[dict[str, Any]]) -> None:
    """Insert rows in chunks, one transaction."""
    with engine.begin() as connection:
        for start in range(0, len(rows), CHUNK):
            connection.execute(insert(table), rows[start : start + CHUNK])


# --- the experiment's rows, in bulk (this bench and bench/experiment.py) ----------------------


def insert_assignments(engine: Engine, percent: int, tickets: list[tuple[str, str, datetime]]):
    """A period the setting started at the first ticket's creation, and each (key, arm,
    created) ticket's row as `holdout.enroll` stores it on the delivery that creates it."""
    period = {"percent": percent, "started_at": tickets[0][2], "started_by": holdout.SETTING}
    bulk_insert(engine, ExperimentPeriod, [period])
    rows = [
        {
            "ticket_key": assignment.canonical(key),
            "arm": arm,
            "percent": percent,
            "assigned_at": at,
            "ticket_ref": key,
            "created_at": at,
        }
        for key, arm, at in tickets
    ]
    bulk_insert(engine, ExperimentAssignment, rows)


def pull_row(key: str, number: int, ticket: str, state: str, at: datetime) -> dict[str, Any]:
    """A pull_requests row as `tracking.observe` stores a pull request's last state."""
    return {
        "key": key,
        "repo": key.rsplit("#", 1)[0],
        "number": number,
        "title": f"{ticket}: fix",
        "head_ref": ticket,
        "url": None,
        "state": state,
        "source_updated_at": at,
        "closed_at": None if state == "open" else at,
        "merged_at": at if state == "merged" else None,
        "updated_at": at,
    }


def insert_pulls(engine: Engine, pulls: list[dict[str, Any]], tickets: list[str]) -> None:
    """Pull requests, each linked to its ticket as a Jira key, and the outcomes
    `outcomes.refresh` computes from them (5,000 tickets per transaction)."""
    bulk_insert(engine, PullRequest, pulls)
    links = [
        {
            "ticket_key": ticket,
            "pr_key": pull["key"],
            "kind": "jira",
            "created_at": pull["updated_at"],
        }
        for pull, ticket in zip(pulls, tickets, strict=True)
    ]
    bulk_insert(engine, TicketLink, links)
    linked = sorted(set(tickets))
    for start in range(0, len(linked), 5_000):
        with db.transaction(engine) as session:
            outcomes.refresh(session, linked[start : start + 5_000])


# --- the fill -----------------------------------------------------------------------------


def fill(engine: Engine, rows: list[dict[str, Any]], tickets: int, events: int) -> dict:
    """Lessons, tickets in both arms, exposures, loads and outcomes; returns the counts."""
    rng = np.random.default_rng(27)
    with db.transaction(engine) as session:
        bulk.put_many(session, [datasets.lesson(r, "bench") for r in rows[:LESSONS]], actor="bench")
    ids = np.array([r["key"] for r in rows[:LESSONS]])
    # A few lessons fit many tickets and most fit few, as in a real playbook.
    weights = 1 / np.arange(1, len(ids) + 1) ** 0.8
    weights /= weights.sum()
    salt = SALT.encode()
    keys = [f"EXP-{i + 1}" for i in range(tickets)]
    arms = [assignment.arm(salt, key, PERCENT) for key in keys]
    created = [START + timedelta(minutes=7 * i) for i in range(tickets)]
    candidates = rng.choice(len(ids), size=(tickets, PER_TICKET * 3), p=weights)
    ranked = [list(dict.fromkeys(ids[row].tolist()))[:PER_TICKET] for row in candidates]
    insert_assignments(engine, PERCENT, list(zip(keys, arms, created, strict=True)))
    bulk_insert(
        engine,
        SeenTicket,
        [
            {"ticket_key": key, "via": "jira", "seen_at": at}
            for key, at in zip(keys, created, strict=True)
        ],
    )
    exposures = [
        {
            "ticket_key": key,
            "bullet_id": bullet_id,
            "arm": arm,
            "rank": rank,
            "query_id": f"q{i}",
            "consumer": CONSUMER,
            "at": at,
        }
        for i, (key, arm, at, lessons) in enumerate(zip(keys, arms, created, ranked, strict=True))
        for rank, bullet_id in enumerate(lessons, 1)
    ]
    bulk_insert(engine, ExperimentExposure, exposures)
    loads = [
        load_row(row["bullet_id"], row["ticket_key"], row["rank"], row["query_id"], row["at"])
        for row in exposures
        if row["arm"] == "shown"
    ]
    # Searches without a ticket (agents, the CLI) load lessons too; they fill up the events.
    extra = max(events - len(exposures) - len(loads), 0)
    picks = rng.choice(len(ids), size=extra, p=weights)
    loads += [
        load_row(str(ids[p]), None, 1, f"s{i}", START + timedelta(seconds=40 * i))
        for i, p in enumerate(picks)
    ]
    bulk_insert(engine, UsageEvent, loads)
    pulls = settle(engine, keys, arms, created, rng)
    with engine.begin() as connection:
        # The counters `usage.record` would have kept.
        loaded = (
            select(func.count())
            .where(UsageEvent.bullet_id == Bullet.id, UsageEvent.kind == "loaded")
            .scalar_subquery()
        )
        connection.execute(update(Bullet).values(loads=loaded))
        if connection.dialect.name == "postgresql":
            connection.execute(text("ANALYZE"))  # as autovacuum would within a minute
    return {
        "lessons": len(ids),
        "tickets": tickets,
        "exposures": len(exposures),
        "loads": len(loads),
        "events": len(exposures) + len(loads),
        "pull_requests": pulls,
    }


def load_row(bullet_id: str, ticket: str | None, rank: int, query: str, at: datetime) -> dict:
    """A `loaded` usage event as the bot records a comment's lesson (once per ticket)."""
    subject = ticket or query
    return {
        "kind": "loaded",
        "bullet_id": bullet_id,
        "ticket_key": ticket,
        "consumer": CONSUMER,
        "rank": rank,
        "query_id": query,
        "ts": at,
        "dedup_key": usage.once_key("loaded", subject, bullet_id),
        "counted": True,
    }


def settle(engine: Engine, keys: list[str], arms: list[str], created: list, rng) -> int:
    """Pull requests for 90% of the tickets, merged more often when shown; outcomes refreshed."""
    pulls, tickets = [], []
    for key, arm, at in zip(keys, arms, created, strict=True):
        if rng.random() >= 0.9:
            continue
        merged = rng.random() < (0.55 if arm == "shown" else 0.5)
        state = "merged" if merged else ("open" if rng.random() < 0.05 else "closed")
        done = at + timedelta(hours=float(rng.exponential(72)))
        number = len(pulls) + 1
        pulls.append(pull_row(f"apache/scale#{number}", number, key, state, done))
        tickets.append(key)
    insert_pulls(engine, pulls, tickets)
    return len(pulls)


# --- the timings --------------------------------------------------------------------------


def percentiles(times: list[float]) -> dict[str, Any]:
    """p50 and p90 in ms of measured times."""
    return {
        "p50_ms": round(1000 * float(np.percentile(times, 50)), 1),
        "p90_ms": round(1000 * float(np.percentile(times, 90)), 1),
        "runs": len(times),
    }


def timed(action: Callable[[], Any], repeat: int, warm: int = 1) -> dict[str, Any]:
    """``action`` after ``warm`` untimed calls (imports, caches), then ``repeat`` timed ones."""
    for _ in range(warm):
        action()
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        action()
        times.append(time.perf_counter() - started)
    return percentiles(times)


def environment(url: str) -> dict[str, str]:
    """The environment of a CLI process on the bench database, the experiment as filled."""
    return {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "LOG_LEVEL": "WARNING",
        "PLAYBOOK_DATABASE_URL": url,
        "PLAYBOOK_HOLDOUT_PERCENT": str(PERCENT),
        "PLAYBOOK_EXPERIMENT_SALT": SALT,
    }


def cli(url: str, *args: str) -> Callable[[], None] | None:
    """A fresh `playbook-bot` process running ``args``; None when this release has no such
    command."""
    env = environment(url)
    probe = subprocess.run(
        [*command(), *args[:1], "--help"], env=env, capture_output=True, check=False
    )
    if probe.returncode != 0:
        return None

    def call() -> None:
        done = subprocess.run([*command(), *args], env=env, capture_output=True, check=False)
        if done.returncode != 0:
            raise SystemExit(f"playbook-bot {args[0]} failed: {done.stderr.decode()[-500:]}")

    return call


def api(engine: Engine, url: str) -> Callable[[str], Callable[[], None] | None]:
    """GETs of the API through Flask's test client with the maintainer token."""
    from bot.config import Settings

    # bench/webhooks.py (the webhook load bench) shadows the package on a bench's path.
    saved = sys.path[:]
    sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != ROOT / "bench"]
    try:
        from webhooks import create_app
    finally:
        sys.path[:] = saved
    settings = Settings(
        PLAYBOOK_DATABASE_URL=url,
        PLAYBOOK_API_TOKEN=TOKEN,
        PLAYBOOK_HOLDOUT_PERCENT=PERCENT,
        PLAYBOOK_EXPERIMENT_SALT=SALT,
        # Set only so the app does not warn that the webhook doors refuse every delivery.
        GITHUB_WEBHOOK_SECRET="bench",
        JIRA_WEBHOOK_SECRET="bench",
        _env_file=None,
    )
    app = create_app(settings, engine=engine)
    client = app.test_client()
    routes = {rule.rule for rule in app.url_map.iter_rules()}

    def getter(path: str) -> Callable[[], None] | None:
        if path not in routes:
            return None

        def call() -> None:
            answer = client.get(path, headers={"Authorization": f"Bearer {TOKEN}"})
            if answer.status_code != 200:
                raise SystemExit(f"GET {path}: {answer.status_code} {answer.get_data()[:300]!r}")

        return call

    return getter


def in_transaction(engine: Engine, work: Callable[[Any], Any]) -> Callable[[], None]:
    """``work(session)`` in a transaction of its own, as a request or a command runs it."""

    def call() -> None:
        with db.transaction(engine) as session:
            work(session)

    return call


def report_rows(engine: Engine, url: str, repeat: int) -> dict[str, Any]:
    """The report and its baselines, ``repeat`` times each, interleaved so drift hits both."""
    get = api(engine, url)
    actions: dict[str, Callable[[], None] | None] = {
        "report_build": in_transaction(engine, report.build),
        "count_exposures": in_transaction(
            engine, lambda s: s.scalar(select(func.count()).select_from(ExperimentExposure))
        ),
        "stats": in_transaction(engine, upkeep.stats),
        "api_experiment": get("/api/v1/experiment"),
        "api_stats": get("/api/v1/stats"),
        "cli_experiment": cli(url, "experiment", "--json"),
        "cli_stats": cli(url, "stats", "--json"),
        # A process that starts and exits: what every command pays before its work.
        "cli_help": cli(url, "--help"),
    }
    rows: dict[str, Any] = {}
    for name, action in actions.items():
        if action is None:
            rows[name] = None
            log(f"  {name}: not in this release")
            continue
        rows[name] = timed(action, repeat)
        log(f"  {name}: p50 {rows[name]['p50_ms']} ms, p90 {rows[name]['p90_ms']} ms")
    for name, base in (
        ("report_build", "stats"),
        ("report_build", "count_exposures"),
        ("api_experiment", "api_stats"),
        ("cli_experiment", "cli_stats"),
    ):
        if rows.get(name) and rows.get(base):
            rows[f"{name}_per_{base}"] = round(rows[name]["p50_ms"] / rows[base]["p50_ms"], 2)
    return rows


def holdout_rows(engine: Engine, rows: list[dict[str, Any]], tickets: int) -> dict[str, Any]:
    """Per call on the full database, beside the search every comment's delivery makes:
    `holdout.enroll` of a new ticket, of an enrolled one (an edit, a redelivery) and with the
    experiment off (the default; rolled back, since it stops the running period), and
    `holdout.arm_for` of an enrolled ticket (an agent's search)."""
    config = holdout.Config(percent=PERCENT, salt=SALT)
    rng = np.random.default_rng(3)
    queries = [rows[int(i)] for i in rng.choice(len(rows), size=CALLS, replace=False)]
    enrolled = [f"EXP-{int(i) + 1}" for i in rng.choice(tickets, size=CALLS, replace=False)]
    names = ("search", "enroll_new", "enroll_enrolled", "enroll_off", "arm_for")
    times: dict[str, list[float]] = {name: [] for name in names}

    def clocked(name: str, action: Callable[..., Any], *args: Any, **kwargs: Any) -> None:
        started = time.perf_counter()
        action(*args, **kwargs)
        times[name].append(time.perf_counter() - started)

    retriever = retrieval.Retriever.shared
    with db.transaction(engine) as session:  # the first search of a process builds the index
        retriever(session).search(session, datasets.ticket(queries[0]), k=PER_TICKET)
    for i, (row, old) in enumerate(zip(queries, enrolled, strict=True)):
        now, new = clock.now(), f"NEW-{i + 1}"
        with db.transaction(engine) as session:
            search = retriever(session).search
            clocked("search", search, session, datasets.ticket(row), k=PER_TICKET)
            clocked("enroll_new", holdout.enroll, session, config, new, now=now)
            clocked("enroll_enrolled", holdout.enroll, session, config, old, now=now)
            clocked("arm_for", holdout.arm_for, session, config, old, now)
        with Session(engine) as session:
            clocked("enroll_off", holdout.enroll, session, holdout.OFF, new, now=now)
            session.rollback()
    result: dict[str, Any] = {name: percentiles(values) for name, values in times.items()}
    for name in names[1:]:
        result[f"{name}_per_search"] = round(result[name]["p50_ms"] / result["search"]["p50_ms"], 2)
    return result


def database_rows(server_url: str | None, rows: list, tickets: int, events: int, repeat: int):
    """Fill one database and time everything on it."""
    name = "postgresql" if server_url else "sqlite"
    with scratch_database(server_url, "experimentscale") as (engine, url):
        started = time.perf_counter()
        counts = fill(engine, rows, tickets, events)
        fill_s = round(time.perf_counter() - started, 1)
        log(f"{name}: filled {counts} in {fill_s} s")
        timings = report_rows(engine, url, repeat)
        check = holdout_rows(engine, rows, tickets)
        log(
            "  "
            + ", ".join(f"{k} p50 {v['p50_ms']} ms" for k, v in check.items() if "_per_" not in k)
        )
    return {"database": name, "fill_s": fill_s, **counts, **timings, "holdout_check": check}


def cell(row: dict[str, Any], name: str) -> str:
    """p50 / p90 ms of one timing, or a dash when this release lacks it."""
    timing = row.get(name)
    return "-" if not timing else f"{timing['p50_ms']:,} / {timing['p90_ms']:,}"


def print_tables(results: list[dict[str, Any]]) -> None:
    """The README's tables."""
    print(
        "| database | `report.build` | `upkeep.stats` | `count(*)` exposures "
        "| `GET /api/v1/experiment` | `GET /api/v1/stats` | `experiment --json` | `stats --json` "
        "| `--help` | report / stats, API / API, CLI / CLI |"
    )
    print("| --- |" + " ---: |" * 9)
    for r in results:
        ratios = " / ".join(
            f"{r[k]}x" if r.get(k) is not None else "-"
            for k in (
                "report_build_per_stats",
                "api_experiment_per_api_stats",
                "cli_experiment_per_cli_stats",
            )
        )
        print(
            f"| {r['database']} | {cell(r, 'report_build')} | {cell(r, 'stats')} "
            f"| {cell(r, 'count_exposures')} | {cell(r, 'api_experiment')} "
            f"| {cell(r, 'api_stats')} | {cell(r, 'cli_experiment')} | {cell(r, 'cli_stats')} "
            f"| {cell(r, 'cli_help')} | {ratios} |"
        )
    print()
    print(
        "| database | search | `enroll`, new ticket | `enroll`, enrolled ticket "
        "| `enroll`, experiment off | `arm_for`, enrolled ticket |"
    )
    print("| --- |" + " ---: |" * 5)
    for r in results:
        c = r["holdout_check"]
        timings = [
            f"{cell(c, name)} ({c[f'{name}_per_search']}x)"
            for name in ("enroll_new", "enroll_enrolled", "enroll_off", "arm_for")
        ]
        print(f"| {r['database']} | {cell(c, 'search')} | {' | '.join(timings)} |")


def main() -> None:
    """Fill SQLite (and PostgreSQL), time the report and the held-out check, print."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--scale", action="store_true", help="(how bench/experiment.py gets here)")
    parser.add_argument("--tickets", type=int, default=100_000)
    parser.add_argument("--events", type=int, default=1_000_000, help="loads and exposures")
    parser.add_argument("--repeat", type=int, default=7, help="timed calls of each")
    parser.add_argument("--database-url", default=None, help="also run on this PostgreSQL")
    datasets.add_arguments(parser, positional=True)
    args = parser.parse_args()
    dataset = datasets.from_arguments(args)
    if len(dataset.rows) < LESSONS + CALLS:
        raise SystemExit(f"the dataset needs {LESSONS + CALLS} issues")
    servers = [None, *([args.database_url] if args.database_url else [])]
    results = [
        database_rows(server, dataset.rows, args.tickets, args.events, args.repeat)
        for server in servers
    ]
    print_tables(results)
    print(
        json.dumps(
            {
                "dataset": dataset.describe(),
                "machine": machine.describe(args.database_url),
                "results": results,
            }
        )
    )


if __name__ == "__main__":
    main()

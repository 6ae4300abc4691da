"""Webhook load: signed GitHub deliveries at a steady rate against the real receiver and worker.

Usage: python bench/webhooks.py [--rate 500] [--seconds 20] [--target serve|gunicorn|both]
                                [--postgres URL] [--drain N]

`serve` is `playbook-bot serve` on a fresh SQLite file (one process, embedded worker);
`gunicorn` is `gunicorn -w 2 -k gthread webhooks.wsgi:app` beside one `playbook-bot worker`
on a fresh PostgreSQL schema. Each delivery is a real `issues.opened` payload for its own issue
number, signed with the webhook secret; one in every 20 requests re-sends an earlier delivery id
(a redelivery). Requests leave on a fixed schedule over keep-alive connections (open loop:
a slow answer does not slow the sender, and latency counts from the scheduled send time).

Reports accepted/s, p50/p99 time to answer, p50/p99 time until the worker finished the delivery,
duplicates (a delivery processed or commented on more than once) and lost deliveries (answered
2xx but not done afterwards). Ends with one JSON line.

`--drain N` measures the worker alone instead: N deliveries (each carrying an installation id,
as a GitHub App's do) are put in the inbox, then `--workers` worker processes (at normal
priority; `--workers 1,2,4` runs each count in turn) empty it. Throughput counts from the first
worker's start (after its imports) to the last outcome; the start-up is reported apart.
`--baseline REF` runs the same measurements, alternating, with the project as it was at the
git revision REF (its code seeds its own schema and runs its own worker), so a change is
compared with what it replaces in one run on one machine; `--rounds` repeats the alternation.
`--revision REF` measures a revision instead of the working tree (which may hold edits in
progress). Either may also name a folder holding a copy of the project.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import hmac
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from sqlalchemy import create_engine, func, select, text
from sqlalchemy.engine import make_url

ROOT = Path(__file__).resolve().parents[1]
# This file's own folder comes first on sys.path and its name would shadow the `webhooks`
# package; the project root takes its place (or, for `--baseline`, another revision's tree).
CODE = Path(os.environ.get("BENCH_CODE") or ROOT)
sys.path[0] = str(CODE)

from playbook import db  # noqa: E402
from playbook.models import Delivery, SideEffect, WorkerHeartbeat  # noqa: E402

# A `--baseline` revision from before playbook/ was grouped into rooms has these at the top.
# Asked of the tree, not by a failed import: an editable install would fill the gap from here.
if (CODE / "playbook" / "lessons").is_dir():
    from playbook.deliveries import inbox
    from playbook.lessons import lifecycle
else:
    from playbook import inbox, lifecycle  # type: ignore[attr-defined,no-redef]

SECRET = "bench-secret"
FIXTURE = ROOT / "tests" / "fixtures" / "github" / "issues.opened.json"
BIN = Path(sys.executable).parent
LESSONS = [
    "Run the spell checker over README and docs before opening a pull request.",
    "Typos in the README file are fixed in the same PR as the docs build change.",
    "Check rendered Markdown of the README file on the repository page, not only locally.",
]


@dataclass
class Sent:
    """What the load generator saw for one request."""

    delivery_id: str
    scheduled: float  # wall-clock time the request was due to leave
    status: int = 0
    answer_ms: float = 0.0
    body: dict = field(default_factory=dict)
    redelivery: bool = False


def free_port() -> int:
    """An unused loopback port."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def sign(body: bytes) -> str:
    """GitHub's X-Hub-Signature-256 for ``body``."""
    return "sha256=" + hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()


def payloads(count: int) -> list[bytes]:
    """``count`` issues.opened bodies, one issue number each."""
    base = json.loads(FIXTURE.read_text())
    base["installation"] = None
    bodies = []
    for n in range(count):
        base["issue"]["number"] = 10_000 + n
        base["issue"]["title"] = f"Spelling error in the README file, part {n}"
        bodies.append(json.dumps(base).encode())
    return bodies


def request_bytes(port: int, body: bytes, delivery_id: str, keep_alive: bool) -> bytes:
    """One HTTP/1.1 request with GitHub's headers."""
    head = (
        f"POST /webhooks/github HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
        "User-Agent: GitHub-Hookshot/bench\r\nContent-Type: application/json\r\n"
        f"X-GitHub-Event: issues\r\nX-GitHub-Delivery: {delivery_id}\r\n"
        f"X-GitHub-Hook-ID: 1\r\nX-Hub-Signature-256: {sign(body)}\r\n"
        f"Content-Length: {len(body)}\r\n"
        f"Connection: {'keep-alive' if keep_alive else 'close'}\r\n\r\n"
    )
    return head.encode() + body


async def read_response(reader: asyncio.StreamReader) -> tuple[int, bytes]:
    """Status and body of one response."""
    status_line = await reader.readline()
    if not status_line:
        raise ConnectionError("connection closed")
    status = int(status_line.split()[1])
    length = 0
    while (line := await reader.readline()) not in (b"\r\n", b""):
        name, _, value = line.decode().partition(":")
        if name.strip().lower() == "content-length":
            length = int(value)
    return status, await reader.readexactly(length)


async def connection(
    port: int, queue: asyncio.Queue, results: list[Sent], keep_alive: bool
) -> None:
    """One sender taking scheduled requests off the queue, on one connection or one each."""
    reader = writer = None
    while (item := await queue.get()) is not None:
        sent, raw = item
        delay = sent.scheduled - time.time()
        if delay > 0:
            await asyncio.sleep(delay)
        for _ in range(3):  # gunicorn closes idle keep-alive connections: reconnect
            try:
                if writer is None:
                    reader, writer = await asyncio.open_connection("127.0.0.1", port)
                writer.write(raw)
                await writer.drain()
                sent.status, body = await read_response(reader)
                sent.body = json.loads(body or b"{}")
                if not keep_alive:
                    writer.close()
                    writer = None
                break
            except (ConnectionError, asyncio.IncompleteReadError, OSError):
                writer = reader = None
        sent.answer_ms = (time.time() - sent.scheduled) * 1000
        results.append(sent)
    if writer is not None:
        writer.close()


async def generate(
    port: int, rate: float, seconds: float, connections: int, keep_alive: bool
) -> list[Sent]:
    """Send ``rate`` deliveries per second for ``seconds`` from ``connections`` senders."""
    total = int(rate * seconds)
    bodies = payloads(total)
    queue: asyncio.Queue = asyncio.Queue()
    results: list[Sent] = []
    start = time.time() + 0.5
    ids: list[str] = []
    for n in range(total):
        if n % 20 == 19:  # a redelivery of an earlier delivery, body and all
            earlier = (n * 7) % n
            sent = Sent(ids[earlier], start + n / rate, redelivery=True)
            body = bodies[earlier]
        else:
            sent = Sent(str(uuid.uuid4()), start + n / rate)
            body = bodies[n]
        ids.append(sent.delivery_id)
        queue.put_nowait((sent, request_bytes(port, body, sent.delivery_id, keep_alive)))
    for _ in range(connections):
        queue.put_nowait(None)
    await asyncio.gather(
        *(connection(port, queue, results, keep_alive) for _ in range(connections))
    )
    return results


def wait_ready(
    port: int, process: subprocess.Popen, *, worker: bool = True, timeout: float = 30
) -> None:
    """Block until GET /readyz says the database answers (and, with ``worker``, a worker beat)."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"server exited with {process.returncode}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=1) as answer:
                if answer.status == 200:
                    return
        except urllib.error.HTTPError as answer:
            # 503 with the database up means no worker reported yet: enough without one.
            if not worker and json.loads(answer.read()).get("database") == "ok":
                return
            time.sleep(0.2)
        except OSError:
            time.sleep(0.2)
    raise SystemExit("server did not become ready")


def seed(url: str) -> None:
    """Create the schema and a few lessons the deliveries will retrieve."""
    engine = db.make_engine(url)
    db.upgrade(engine)
    with db.transaction(engine) as session:
        for lesson in LESSONS:
            lifecycle.add(session, lesson, learned_from="BENCH-1", actor="bench")
    engine.dispose()


@contextmanager
def postgres_schema(server_url: str) -> Iterator[str]:
    """A fresh schema on the server, dropped afterwards."""
    schema = f"pbbench_{uuid.uuid4().hex[:10]}"
    engine = create_engine(server_url)
    with engine.begin() as connection:
        connection.execute(text(f'CREATE SCHEMA "{schema}"'))
    try:
        url = make_url(server_url).update_query_dict({"options": f"-csearch_path={schema}"})
        yield url.render_as_string(hide_password=False)
    finally:
        with engine.begin() as connection:
            connection.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))
        engine.dispose()


def start(
    commands: list[list[str]], url: str, workdir: Path, code: Path = ROOT
) -> list[subprocess.Popen]:
    """Start the server processes with the bench's settings, running the project at ``code``."""
    env = {
        **os.environ,
        # `python -m bot` finds the packages of ``code`` before any installed copy.
        "PYTHONPATH": str(code),
        "PLAYBOOK_DATABASE_URL": url,
        "GITHUB_WEBHOOK_SECRET": SECRET,
        "PLAYBOOK_SCHEDULER": "0",
        "LOG_LEVEL": "WARNING",
        "PLAYBOOK_WORKER_POLL_SECONDS": "0.2",
    }
    return [
        subprocess.Popen(
            command,
            env=env,
            cwd=code,
            stdout=subprocess.DEVNULL,
            stderr=(workdir / f"process-{n}.log").open("w"),
        )
        for n, command in enumerate(commands)
    ]


def settle(url: str, expected: set[str], timeout: float) -> tuple[float, dict]:
    """Wait until every expected delivery is done; return the wait and the inbox's state."""
    engine = db.make_engine(url)
    started = time.time()
    while True:
        with engine.connect() as connection:
            done = connection.scalar(
                select(func.count()).select_from(Delivery).where(Delivery.status == "done")
            )
        if done >= len(expected) or time.time() - started > timeout:
            break
        time.sleep(0.2)
    with engine.connect() as connection:
        rows = connection.execute(
            select(Delivery.delivery_id, Delivery.status, Delivery.attempts, Delivery.processed_at)
        ).all()
        effects = dict(
            connection.execute(
                select(SideEffect.delivery_id, func.count()).group_by(SideEffect.delivery_id)
            ).all()
        )
    engine.dispose()
    return time.time() - started, {"rows": rows, "effects": effects}


def percentile(values: list[float], share: float) -> float:
    """The ``share`` quantile of ``values`` (0 when empty)."""
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(int(share * len(ordered)), len(ordered) - 1)]


def run(
    name: str, commands: list[list[str]], url: str, port: int, args: argparse.Namespace
) -> dict:
    """One target: start it, load it, let it drain, stop it, and count."""
    workdir = Path(tempfile.mkdtemp(prefix="pbbench-"))
    seed(url)
    processes = start(commands, url, workdir)
    try:
        wait_ready(port, processes[0], worker=not args.no_worker)
        began = time.time()
        results = asyncio.run(
            generate(port, args.rate, args.seconds, args.connections, args.keep_alive)
        )
        elapsed = max(s.scheduled for s in results) - min(s.scheduled for s in results)
        accepted = {s.delivery_id for s in results if s.status == 202}
        answered = {s.delivery_id for s in results if s.status in (200, 202)}
        drain, state = settle(url, answered, timeout=0 if args.no_worker else 120)
    finally:
        for process in processes:
            process.send_signal(signal.SIGTERM)
        for process in processes:
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()
    by_id = {row.delivery_id: row for row in state["rows"]}
    processed = [
        (by_id[s.delivery_id].processed_at.timestamp() - s.scheduled) * 1000
        for s in results
        if not s.redelivery and s.delivery_id in by_id and by_id[s.delivery_id].processed_at
    ]
    duplicates = sum(1 for row in state["rows"] if row.attempts > 1) + sum(
        1 for count in state["effects"].values() if count > 1
    )
    lost = sum(1 for d in answered if d not in by_id or by_id[d].status != "done")
    # The first seconds open the servers' database connections: sent and checked, not timed.
    measured_from = min(s.scheduled for s in results) + args.warmup
    answers = [s.answer_ms for s in results if s.scheduled >= measured_from]
    report = {
        "target": name,
        "sent": len(results),
        "accepted_per_s": round(sum(1 for s in results if s.status in (200, 202)) / elapsed, 1),
        "new_deliveries": len(accepted),
        "answered_2xx": sum(1 for s in results if s.status in (200, 202)),
        "errors": sum(1 for s in results if s.status not in (200, 202)),
        "redeliveries_answered_duplicate": sum(
            1 for s in results if s.redelivery and s.body.get("status") == "duplicate"
        ),
        "timed": len(answers),
        "answer_p50_ms": round(percentile(answers, 0.5), 1),
        "answer_p99_ms": round(percentile(answers, 0.99), 1),
        "processed_p50_ms": round(percentile(processed, 0.5), 1),
        "processed_p99_ms": round(percentile(processed, 0.99), 1),
        "drain_after_last_send_s": round(drain, 1),
        "duplicates": duplicates,
        "lost": lost,
        "load_s": round(time.time() - began, 1),
    }
    shutil.rmtree(workdir, ignore_errors=True)
    return report


INSTALLATION = 4242


def fill(url: str, count: int) -> None:
    """Create the schema, seed lessons, and put ``count`` App deliveries in the inbox."""
    ticket_key = None  # a baseline from before deliveries kept their ticket (0009)
    if (CODE / "playbook" / "deliveries" / "tickets.py").is_file():
        from playbook.deliveries.tickets import ticket_key

    seed(url)
    payload = json.loads(FIXTURE.read_text())
    payload["installation"] = {"id": INSTALLATION}
    engine = db.make_engine(url)
    with db.transaction(engine) as session:
        for number in range(1, count + 1):
            payload["issue"]["number"] = number
            inbox.accept(
                session,
                source="github",
                event="issues",
                action="opened",
                delivery_id=str(uuid.uuid4()),
                payload=json.dumps(payload),
                installation_id=INSTALLATION,
                **({"ticket_key": ticket_key("github", payload)} if ticket_key else {}),
            )
    engine.dispose()


def checkout(revision: str) -> Path:
    """The project at ``revision``: a folder holding it as it is, or a git revision exported."""
    if Path(revision, "bot", "worker.py").is_file():
        return Path(revision).resolve()
    folder = Path(tempfile.mkdtemp(prefix="pbbench-code-"))
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", revision], capture_output=True, check=False
    )
    if archive.returncode != 0:
        raise SystemExit(f"git cannot export {revision!r}: {archive.stderr.decode().strip()}")
    subprocess.run(["tar", "-x", "-C", str(folder)], input=archive.stdout, check=True)
    return folder


def drain(name: str, url: str, count: int, workers: int, code: Path) -> dict:
    """Fill the inbox with ``count`` deliveries, then time ``workers`` workers emptying it."""
    env = {**os.environ, "BENCH_CODE": str(code), "PLAYBOOK_DATABASE_URL": url}
    # The code under test builds its own schema and rows, so any revision can be measured.
    subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), "--fill", str(count)], env=env, check=True
    )
    workdir = Path(tempfile.mkdtemp(prefix="pbbench-"))
    command = [sys.executable, "-m", "bot", "worker"]
    began = time.time()
    processes = start([command] * workers, url, workdir, code)
    engine = db.make_engine(url)
    finished = (Delivery.status.in_(("done", "ignored", "dead")),)
    try:
        while True:
            with engine.connect() as connection:
                if connection.scalar(select(func.count()).where(*finished)) >= count:
                    break
            for process in processes:
                if process.poll() is not None:
                    raise SystemExit(f"worker exited with {process.returncode}")
            time.sleep(0.1)
        ended = time.time()
        with engine.connect() as connection:
            # Each worker's start is recorded after its imports, when it begins to claim.
            first_start = connection.scalar(select(func.min(WorkerHeartbeat.started_at)))
            last_outcome = connection.scalar(select(func.max(Delivery.processed_at)))
            statuses = dict(
                connection.execute(
                    select(Delivery.status, func.count()).group_by(Delivery.status)
                ).all()
            )
    finally:
        for process in processes:
            process.send_signal(signal.SIGTERM)
        for process in processes:
            process.wait(timeout=30)
        engine.dispose()
        shutil.rmtree(workdir, ignore_errors=True)
    working = (last_outcome or datetime.fromtimestamp(ended, UTC)) - first_start
    seconds = working.total_seconds()
    return {
        "target": name,
        "workers": workers,
        "deliveries": count,
        "statuses": statuses,
        "startup_s": round(first_start.timestamp() - began, 1),
        "seconds": round(seconds, 1),
        "per_s": round(count / seconds, 1),
    }


def drains(args: argparse.Namespace) -> None:
    """The --drain mode: every code revision and worker count, alternating, round by round."""
    codes = [(f"now {args.revision}", checkout(args.revision)) if args.revision else ("now", ROOT)]
    if args.baseline:
        codes.insert(0, (f"baseline {args.baseline}", checkout(args.baseline)))
    counts = [int(n) for n in args.workers.split(",")]
    databases = []
    if args.target in ("serve", "both"):
        databases.append("sqlite")
    if args.target in ("gunicorn", "both"):
        databases.append("postgres")
    results = []
    for round_ in range(1, args.rounds + 1):
        for database in databases:
            for workers in counts:
                for label, code in codes:
                    name = f"{label}, {database}"
                    if database == "sqlite":
                        folder = Path(tempfile.mkdtemp(prefix="pbbench-sqlite-"))
                        url = f"sqlite:///{folder / 'playbook.db'}"
                        result = drain(name, url, args.drain, workers, code)
                        shutil.rmtree(folder, ignore_errors=True)
                    else:
                        with postgres_schema(args.postgres) as url:
                            result = drain(name, url, args.drain, workers, code)
                    result["round"] = round_
                    results.append(result)
                    print(
                        f"round {round_}: {name}, {workers} worker(s): {result['deliveries']} "
                        f"deliveries in {result['seconds']} s after a {result['startup_s']} s "
                        f"start, {result['per_s']} deliveries/s {result['statuses']}",
                        flush=True,
                    )
    print(json.dumps({"drain": args.drain, "cpus": os.cpu_count(), "results": results}))


def main() -> None:
    """Run the chosen targets and print a table and the JSON line."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--rate", type=float, default=500)
    parser.add_argument("--seconds", type=float, default=20)
    parser.add_argument("--connections", type=int, default=32)
    parser.add_argument("--target", choices=["serve", "gunicorn", "both"], default="both")
    parser.add_argument("--postgres", default="postgresql+psycopg://postgres@127.0.0.1:5432/test")
    parser.add_argument(
        "--keep-alive", action="store_true", help="reuse connections (GitHub opens one each)"
    )
    parser.add_argument("--warmup", type=float, default=2, help="seconds sent but not timed")
    parser.add_argument("--gunicorn", default="-w 3 -k sync", help="gunicorn's worker options")
    parser.add_argument("--worker-nice", type=int, default=19, help="0 to run it unniced")
    parser.add_argument("--no-worker", action="store_true", help="receiver only (diagnostic)")
    parser.add_argument("--drain", type=int, default=0, help="time workers on N deliveries")
    parser.add_argument("--workers", default="1", help="worker counts for --drain, e.g. 1,2,4")
    parser.add_argument("--baseline", help="git revision to measure beside this tree (--drain)")
    parser.add_argument("--revision", help="measure this git revision, not the working tree")
    parser.add_argument("--rounds", type=int, default=1, help="repeat --drain's alternation")
    parser.add_argument("--fill", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.fill:  # the seeding step of --drain, run by the code under test
        fill(os.environ["PLAYBOOK_DATABASE_URL"], args.fill)
        return
    if args.drain:
        drains(args)
        return
    reports = []
    if args.target in ("serve", "both"):
        folder = Path(tempfile.mkdtemp(prefix="pbbench-sqlite-"))
        url = f"sqlite:///{folder / 'playbook.db'}"
        port = free_port()
        serve = [str(BIN / "playbook-bot"), "serve", "--port", str(port), "--threads", "8"]
        reports.append(run("serve+sqlite", [serve], url, port, args))
        shutil.rmtree(folder, ignore_errors=True)
    if args.target in ("gunicorn", "both"):
        with postgres_schema(args.postgres) as url:
            port = free_port()
            bind = ["-b", f"127.0.0.1:{port}"]
            web = [str(BIN / "gunicorn"), *args.gunicorn.split(), *bind, "webhooks.wsgi:app"]
            worker = [str(BIN / "playbook-bot"), "worker"]
            if args.worker_nice:
                # The answer has a deadline and the processing does not: on a shared host the
                # worker yields the CPU to the web processes (README, production layout).
                worker = ["nice", "-n", str(args.worker_nice), *worker]
            commands = [web] if args.no_worker else [web, worker]
            reports.append(run("gunicorn+worker+postgres", commands, url, port, args))
    for r in reports:
        print(
            f"{r['target']:>26}: {r['accepted_per_s']} accepted/s, answer p50 "
            f"{r['answer_p50_ms']} ms p99 {r['answer_p99_ms']} ms, processed p50 "
            f"{r['processed_p50_ms']} ms p99 {r['processed_p99_ms']} ms, "
            f"{r['errors']} errors, {r['duplicates']} duplicates, {r['lost']} lost"
        )
    print(json.dumps({"rate": args.rate, "seconds": args.seconds, "results": reports}))


if __name__ == "__main__":
    main()

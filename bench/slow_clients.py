"""Slow clients: normal requests answered while many connections trickle their requests.

Usage: python bench/slow_clients.py [--connections 50] [--seconds 20] [--interval 3]
                                    [--target serve,production,gthread,serve-gthread]
                                    [--postgres URL]

Each target is started fresh on a free port, on a fresh SQLite file (or a fresh PostgreSQL
schema with --postgres, for the gunicorn targets):

- `serve`: `playbook-bot serve` (waitress, worker and scheduler in the process);
- `production`: the README's production gunicorn command (gevent workers, `-w 3`);
- `gthread`: the same command with `-k gthread` (4 threads per worker), the worker model
  this project ran before; `sync` (gunicorn's default, which the README used to advise) can
  be named too;
- `serve-gthread`: gunicorn with one gthread worker of 4 threads, the server `serve` ran on.

For each target, first the baseline: normal requests, one after another, alternating
`GET /healthz` and a signed GitHub delivery, each on a new connection as GitHub opens one,
for --seconds. Then the attack: --connections connections, half sending a request's header
lines one every --interval seconds, half sending complete headers and then the body one byte
every --interval seconds; a connection the server closes is opened again (an attacker would).
After the attack has been open for 2 intervals, the same normal requests for --seconds.

Reports per target: p50/p99/max of the normal requests' answer times with and without the
attack, how many failed (no answer within 10 s, GitHub's limit, or a refused connection),
the attack connections open at the end, and how many the server closed. Ends with one JSON line.
"""

from __future__ import annotations

import argparse
import hashlib
import hmac
import http.client
import json
import os
import shlex
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# This folder comes first on sys.path and its webhooks.py would shadow the package.
sys.path[0] = str(ROOT)

from bench.machine import describe  # noqa: E402

SECRET = "bench-secret"
FIXTURE = ROOT / "tests" / "fixtures" / "github" / "issues.opened.json"
BIN = Path(sys.executable).parent
ANSWER_LIMIT = 10.0  # GitHub waits this long for an answer


def free_port() -> int:
    """An unused loopback port."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def readme_command() -> list[str]:
    """The production gunicorn command of the README."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    layout = readme.split("### Production layout", 1)[1]
    line = next(ln for ln in layout.splitlines() if ln.startswith("gunicorn "))
    return shlex.split(line.split("#", 1)[0])


def command(target: str, port: int) -> list[str]:
    """The command line that starts ``target`` on ``port``."""
    if target == "serve":
        return [str(BIN / "playbook-bot"), "serve", "--port", str(port)]
    if target == "serve-gthread":
        return [
            str(BIN / "gunicorn"),
            *("-k", "gthread", "-w", "1", "--threads", "4", "--limit-request-line", "8190"),
            *("-b", f"127.0.0.1:{port}", "webhooks.wsgi:app"),
        ]
    args = readme_command()
    args[0] = str(BIN / "gunicorn")
    bind = args.index("-b")
    args[bind + 1] = f"127.0.0.1:{port}"
    if target in {"gthread", "sync"}:
        args[1:1] = ["-k", target] + (["--threads", "4"] if target == "gthread" else [])
    return args


@dataclass
class Attack:
    """Connections trickling requests at a server, reopened when the server closes them."""

    port: int
    connections: int
    interval: float
    closed_by_server: int = 0
    opened: int = 0
    _open: set[int] = field(default_factory=set)
    _stop: threading.Event = field(default_factory=threading.Event)
    _threads: list[threading.Thread] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def start(self) -> None:
        """Open the connections, one thread each (a blocking send shows a stalled server)."""
        for n in range(self.connections):
            kind = "headers" if n % 2 == 0 else "body"
            thread = threading.Thread(target=self._run, args=(n, kind), daemon=True)
            thread.start()
            self._threads.append(thread)

    def open_now(self) -> int:
        """Attack connections open at this moment."""
        with self._lock:
            return len(self._open)

    def stop(self) -> None:
        """Close every attack connection."""
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=self.interval + 5)

    def _run(self, n: int, kind: str) -> None:
        while not self._stop.is_set():
            try:
                sock = socket.create_connection(("127.0.0.1", self.port), timeout=5)
            except OSError:
                self._stop.wait(0.5)
                continue
            with self._lock:
                self._open.add(n)
                self.opened += 1
            try:
                self._trickle(sock, kind)
            except OSError:
                with self._lock:
                    self.closed_by_server += 1
            finally:
                with self._lock:
                    self._open.discard(n)
                sock.close()

    def _trickle(self, sock: socket.socket, kind: str) -> None:
        sock.settimeout(0.2)
        head = f"POST /webhooks/github HTTP/1.1\r\nHost: 127.0.0.1:{self.port}\r\n"
        if kind == "body":
            head += "Content-Type: application/json\r\nContent-Length: 100000\r\n\r\n"
        sock.sendall(head.encode())
        piece = 0
        while not self._stop.wait(self.interval):
            if kind == "headers":
                sock.sendall(f"X-Slow-{piece}: {'a' * 20}\r\n".encode())
            else:
                sock.sendall(b"{" if piece == 0 else b" ")
            piece += 1
            try:
                # The server closing shows as end of stream, or as an early answer (408, 400).
                if sock.recv(4096) == b"":
                    raise ConnectionResetError("closed by the server")
                raise ConnectionResetError("answered by the server")
            except TimeoutError:
                pass  # still open and waiting for more: what the attacker wants


def signed_delivery() -> tuple[bytes, dict[str, str]]:
    """A GitHub issues.opened delivery, signed, with a fresh delivery id."""
    payload = json.loads(FIXTURE.read_text())
    payload["installation"] = None
    body = json.dumps(payload).encode()
    signature = "sha256=" + hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()
    return body, {
        "Content-Type": "application/json",
        "X-GitHub-Event": "issues",
        "X-GitHub-Delivery": str(uuid.uuid4()),
        "X-Hub-Signature-256": signature,
    }


def normal_requests(port: int, seconds: float) -> tuple[list[float], int]:
    """Answer times (s) of sequential normal requests for ``seconds``, and how many failed."""
    times: list[float] = []
    failed = 0
    end = time.monotonic() + seconds
    n = 0
    while time.monotonic() < end:
        n += 1
        start = time.monotonic()
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=ANSWER_LIMIT)
        try:
            if n % 2:
                connection.request("GET", "/healthz")
                expected = {200}
            else:
                body, headers = signed_delivery()
                connection.request("POST", "/webhooks/github", body, headers)
                expected = {202}
            status = connection.getresponse().status
            if status in expected:
                times.append(time.monotonic() - start)
            else:
                failed += 1
        except OSError:
            failed += 1
        finally:
            connection.close()
        time.sleep(max(0.0, 0.1 - (time.monotonic() - start)))
    return times, failed


def percentiles(times: list[float]) -> dict[str, float | None]:
    """p50, p99 and max in milliseconds."""
    if not times:
        return {"p50_ms": None, "p99_ms": None, "max_ms": None}
    ordered = sorted(times)
    p99 = ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]
    return {
        "p50_ms": round(statistics.median(ordered) * 1000, 1),
        "p99_ms": round(p99 * 1000, 1),
        "max_ms": round(ordered[-1] * 1000, 1),
    }


def wait_up(port: int, process: subprocess.Popen, seconds: float = 60) -> None:
    """Wait until ``/healthz`` answers."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"the server exited with {process.returncode}")
        try:
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            connection.request("GET", "/healthz")
            if connection.getresponse().status == 200:
                return
        except OSError:
            time.sleep(0.2)
    raise SystemExit("the server did not come up")


def database_for(target: str, postgres: str | None, folder: Path) -> tuple[str, str | None]:
    """The database URL for a target's run, and a PostgreSQL schema to drop afterwards."""
    if postgres and target != "serve":
        from sqlalchemy import create_engine, text

        schema = f"bench_slow_{uuid.uuid4().hex[:8]}"
        engine = create_engine(postgres)
        with engine.begin() as connection:
            connection.execute(text(f"CREATE SCHEMA {schema}"))
        engine.dispose()
        joiner = "&" if "?" in postgres else "?"
        return f"{postgres}{joiner}options=-csearch_path%3D{schema}", schema
    return f"sqlite:///{folder / 'playbook.db'}", None


def drop_schema(postgres: str, schema: str) -> None:
    """Remove a run's PostgreSQL schema."""
    from sqlalchemy import create_engine, text

    engine = create_engine(postgres)
    with engine.begin() as connection:
        connection.execute(text(f"DROP SCHEMA {schema} CASCADE"))
    engine.dispose()


def measure(target: str, args: argparse.Namespace) -> dict:
    """Baseline and under-attack answer times for one target."""
    folder = Path(tempfile.mkdtemp(prefix="bench-slow-"))
    port = free_port()
    url, schema = database_for(target, args.postgres, folder)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PLAYBOOK_", "GITHUB_"))}
    env |= {
        "GITHUB_WEBHOOK_SECRET": SECRET,
        "PLAYBOOK_DATABASE_URL": url,
        "PYTHONPATH": str(ROOT),
        "LOG_LEVEL": "WARNING",
    }
    if target != "serve":
        # The production layout migrates first (`playbook-bot db upgrade`).
        subprocess.run(
            [str(BIN / "playbook-bot"), "db", "upgrade"],
            cwd=folder,
            env=env,
            check=True,
            capture_output=True,
        )
    process = subprocess.Popen(
        command(target, port),
        cwd=folder,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=(folder / "server.log").open("w"),
        start_new_session=True,
    )
    try:
        wait_up(port, process)
        base_times, base_failed = normal_requests(port, args.seconds)
        attack = Attack(port, args.connections, args.interval)
        attack.start()
        time.sleep(2 * args.interval)
        held_at_start = attack.open_now()
        times, failed = normal_requests(port, args.seconds)
        held_at_end = attack.open_now()
        attack.stop()
        return {
            "target": target,
            "baseline": {
                **percentiles(base_times),
                "answered": len(base_times),
                "failed": base_failed,
            },
            "attack": {**percentiles(times), "answered": len(times), "failed": failed},
            "connections": args.connections,
            "held_after_warmup": held_at_start,
            "held_at_end": held_at_end,
            "closed_by_server": attack.closed_by_server,
            "opened": attack.opened,
        }
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        if schema and args.postgres:
            drop_schema(args.postgres, schema)


def main() -> None:
    """Run the targets in turn and print a table and one JSON line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--connections", type=int, default=50)
    parser.add_argument("--seconds", type=float, default=20)
    parser.add_argument("--interval", type=float, default=3)
    parser.add_argument("--target", default="serve,production,gthread,serve-gthread")
    parser.add_argument("--postgres", help="PostgreSQL URL for the gunicorn targets")
    args = parser.parse_args()
    results = [measure(target, args) for target in args.target.split(",")]
    print(
        f"{'target':<14} {'baseline p50/p99 ms':>20} {'attack p50/p99/max ms':>24} "
        f"{'failed':>7} {'held':>9} {'closed':>7}"
    )
    for r in results:
        b, a = r["baseline"], r["attack"]
        print(
            f"{r['target']:<14} {b['p50_ms']!s:>9}/{b['p99_ms']!s:<10} "
            f"{a['p50_ms']!s:>9}/{a['p99_ms']!s}/{a['max_ms']!s:<8} "
            f"{a['failed']:>4}/{a['answered'] + a['failed']:<3} "
            f"{r['held_at_end']:>4}/{r['connections']:<4} {r['closed_by_server']:>7}"
        )
    machine = describe(args.postgres)
    print(
        json.dumps(
            {
                "bench": "slow_clients",
                "machine": machine,
                "interval": args.interval,
                "seconds": args.seconds,
                "results": results,
            }
        )
    )


if __name__ == "__main__":
    main()

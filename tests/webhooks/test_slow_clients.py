"""Slow clients cannot take the bot offline: `serve` and the documented gunicorn command answer.

Fifty connections trickle their requests (half the header lines, half the body, each opened
again when the server closes it) while a normal `/healthz` and a signed delivery must still
answer (within GitHub's 10 s, the client's timeout here; bench/slow_clients.py measures how
fast); a connection that stalls is closed by the server, not before its timeout.

Each server starts once for the module, with its client timeouts lowered to a second through
the real configuration (PLAYBOOK_CLIENT_TIMEOUT_SECONDS, and gunicorn's own --keep-alive for
the headers), so no test waits out production's 10 s; the code that enforces them is the same.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import select
import shlex
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import anyio
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from sqlalchemy import Engine

from tests.payloads import fixture_body
from tests.support import GITHUB_SECRET, ROOT, wait_until_up
from webhooks.signatures import sign

pytestmark = pytest.mark.slow

SLOW_CLIENTS = 50
TOKEN = "maintainer-token"
# The servers' client timeout, in the whole seconds waitress counts in (production: 10 s, and
# 5 s for gunicorn's headers). The trickle sends a piece four times within it.
TIMEOUT = 1
TRICKLE_SECONDS = TIMEOUT / 4


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def production_command(port: int) -> list[str]:
    """The docs' production gunicorn command, bound to a local port."""
    readme = (ROOT / "docs" / "production.md").read_text(encoding="utf-8")
    layout = readme.split("### Production layout", 1)[1]
    line = next(ln for ln in layout.splitlines() if ln.startswith("gunicorn "))
    args = shlex.split(line.split("#", 1)[0])
    args[0] = str(Path(sys.executable).with_name("gunicorn"))
    args[args.index("-b") + 1] = f"127.0.0.1:{port}"
    return args


def serve_command(port: int) -> list[str]:
    script = Path(sys.executable).with_name("playbook-bot")
    cli = [str(script)] if script.exists() else [sys.executable, "-m", "bot"]
    return [*cli, "serve", "--port", str(port)]


@pytest.fixture(scope="module", params=["serve", "production"])
def server(
    request, migrated_engine: Engine, database_url: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[str, int]]:
    """`playbook-bot serve` or the production command on the test database, one per module,
    with TIMEOUT for its clients; (target, port). Tests take ``engine`` to start empty."""
    port = free_port()
    folder = tmp_path_factory.mktemp("server")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PLAYBOOK_", "GITHUB_"))}
    env |= {
        "GITHUB_WEBHOOK_SECRET": GITHUB_SECRET,
        "PLAYBOOK_DATABASE_URL": database_url,
        "PROMETHEUS_MULTIPROC_DIR": str(folder / "metrics"),
        "PLAYBOOK_API_TOKEN": TOKEN,
        "PLAYBOOK_CLIENT_TIMEOUT_SECONDS": str(TIMEOUT),
    }
    (folder / "metrics").mkdir()
    target = request.param
    if target == "serve":
        args = serve_command(port)
    else:
        # gunicorn's command line overrides its config file's keepalive (the headers' deadline).
        args = [*production_command(port), "--keep-alive", str(TIMEOUT)]
    process = subprocess.Popen(
        args,
        cwd=folder,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        wait_until_up(f"http://127.0.0.1:{port}", process)
        yield target, port
    finally:
        # gunicorn's quick shutdown: its graceful one polls its workers once a second, and
        # stopping is not what this module tests. `serve` stops at once on SIGTERM.
        process.send_signal(signal.SIGINT if target == "production" else signal.SIGTERM)
        process.communicate(timeout=30)


class Trickle:
    """Connections that send a request a piece at a time and never finish it; one the server
    closes (or answers) is opened again at once, as an attacker would."""

    def __init__(self, port: int, count: int, interval: float = TRICKLE_SECONDS) -> None:
        self.port = port
        self.stop = threading.Event()
        self.sockets = [self._open(n) for n in range(count)]
        self.thread = threading.Thread(target=self._run, args=(interval,), daemon=True)
        self.thread.start()

    def _open(self, n: int) -> socket.socket:
        sock = socket.create_connection(("127.0.0.1", self.port), timeout=5)
        head = f"POST /webhooks/github HTTP/1.1\r\nHost: 127.0.0.1:{self.port}\r\n"
        if n % 2:  # complete headers, then a body that never ends
            head += "Content-Type: application/json\r\nContent-Length: 100000\r\n\r\n{"
        sock.sendall(head.encode())
        return sock

    def _run(self, interval: float) -> None:
        n = 0
        while not self.stop.wait(interval):
            n += 1
            # The server closing shows as end of stream, or as an early answer (408, 400).
            open_now = [sock for sock in self.sockets if sock.fileno() >= 0]
            ended, _, _ = select.select(open_now, [], [], 0)
            for index, sock in enumerate(self.sockets):
                piece = b" " if index % 2 else f"X-Slow-{n}: a\r\n".encode()
                try:
                    if sock in ended:
                        raise ConnectionResetError("closed or answered by the server")
                    sock.sendall(piece)
                except OSError:
                    sock.close()
                    # Opened again; a refused connect is tried again at the next piece.
                    with contextlib.suppress(OSError):
                        self.sockets[index] = self._open(index)

    def close(self) -> None:
        self.stop.set()
        self.thread.join()
        for sock in self.sockets:
            sock.close()


def timed(port: int, method: str, path: str, body: bytes | None = None, headers=None):
    """(status, seconds) of one request on a new connection."""
    start = time.monotonic()
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        connection.request(method, path, body, headers or {})
        status = connection.getresponse().status
    finally:
        connection.close()
    return status, time.monotonic() - start


def delivery() -> tuple[bytes, dict[str, str]]:
    body = fixture_body("issues.opened")
    return body, {
        "Content-Type": "application/json",
        "X-GitHub-Event": "issues",
        "X-GitHub-Delivery": str(uuid.uuid4()),
        "X-Hub-Signature-256": sign(GITHUB_SECRET, body),
    }


def test_normal_requests_answer_while_50_clients_trickle(server, engine: Engine) -> None:
    _target, port = server
    trickle = Trickle(port, SLOW_CLIENTS)
    try:
        # Every slow connection has been accepted and sent a piece more: a line every few
        # seconds, never finishing, is what took gunicorn's sync and gthread workers (the old
        # servers) offline; here a piece comes faster than the server's timeout.
        time.sleep(2 * TRICKLE_SECONDS)
        answers = []
        for _ in range(5):
            answers.append(timed(port, "GET", "/healthz"))
            body, headers = delivery()
            answers.append(timed(port, "POST", "/webhooks/github", body, headers))
    finally:
        trickle.close()
    # Each answered within the client's 10 s (GitHub's limit), while the trickle went on.
    assert [status for status, _ in answers] == [200, 202] * 5, answers


def stalled(port: int, request: bytes) -> tuple[bytes, float]:
    """Send part of a request, then nothing: what the server sends back and when it closes
    (a server that never closes fails here after 30 s)."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        start = time.monotonic()
        sock.sendall(request)
        answer = b""
        while chunk := sock.recv(4096):
            answer += chunk
        return answer, time.monotonic() - start


def test_a_stalled_request_is_closed_after_its_timeout(server, engine: Engine) -> None:
    target, port = server
    head = f"POST /webhooks/github HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n".encode()
    body_head = head + b"Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"
    with ThreadPoolExecutor(2) as pool:
        headers_only = pool.submit(stalled, port, head)
        part_body = pool.submit(stalled, port, body_head)
        (header_answer, header_seconds) = headers_only.result()
        (body_answer, body_seconds) = part_body.result()
    # Each is closed (stalled() fails otherwise), and not before its timeout (the server may
    # start counting a moment before the client does): a busy machine only makes that later,
    # so no upper bound is asserted.
    not_before = 0.9 * TIMEOUT
    if target == "serve":
        # waitress closes a connection that has sent nothing for the timeout.
        assert header_answer == body_answer == b""
        assert header_seconds >= not_before and body_seconds >= not_before
    else:
        # gunicorn's gevent worker gives the headers its keepalive; the body gets the timeout.
        assert header_answer == b""
        assert header_seconds >= not_before
        status_line, _, rest = body_answer.partition(b"\r\n")
        assert status_line == b"HTTP/1.1 408 Request Timeout", body_answer
        assert json.loads(rest.split(b"\r\n\r\n", 1)[1]) == {
            "status": "error",
            "message": f"the request body did not arrive within {TIMEOUT} s",
        }
        assert body_seconds >= not_before


def received(port: int) -> float:
    """The deliveries of `issues` from GitHub that the server's /metrics has counted."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    connection.request("GET", "/metrics", headers={"Authorization": f"Bearer {TOKEN}"})
    answer = connection.getresponse()
    text = answer.read().decode()
    connection.close()
    assert answer.status == 200
    series = 'playbook_deliveries_received_total{event="issues",source="github"} '
    counted = [line.removeprefix(series) for line in text.splitlines() if line.startswith(series)]
    return float(counted[0]) if counted else 0.0


def test_every_door_answers_on_this_server(server, engine: Engine) -> None:
    # The production command runs gevent's workers (patched sockets and threads) and `serve`
    # runs waitress: the webhook, MCP (an asyncio loop behind a2wsgi) and /metrics work on both.
    _target, port = server
    before = received(port)  # other tests of the module send deliveries to this server too
    body, headers = delivery()
    assert timed(port, "POST", "/webhooks/github", body, headers)[0] == 202

    async def list_tools() -> set[str]:
        with anyio.fail_after(60):
            async with (
                create_mcp_http_client(headers={"Authorization": f"Bearer {TOKEN}"}) as http,
                Client(
                    streamable_http_client(f"http://127.0.0.1:{port}/mcp", http_client=http)
                ) as client,
            ):
                tools = await client.list_tools()
                found = await client.call_tool("search_lessons", {"query": "README typo"})
                assert not found.is_error, found
                return {tool.name for tool in tools.tools}

    assert "search_lessons" in anyio.run(list_tools)
    assert received(port) == before + 1


def test_production_waits_on_a_client_as_long_as_github_waits(settings, tmp_path) -> None:
    # The servers above run with a second; by default `serve` gives a client GitHub's 10 s
    # of silence (looked for every 2 s), as gunicorn's body deadline does (webhooks.wsgi).
    from webhooks.server import EmbeddedServer

    assert settings.client_timeout_seconds == 10
    # With no App, serve makes its setup token in the data dir: here, not where tests run.
    here = settings.model_copy(update={"data_dir": str(tmp_path)})
    embedded = EmbeddedServer(here, "127.0.0.1", 0)
    try:
        assert embedded.server.adj.channel_timeout == 10
        assert embedded.server.adj.cleanup_interval == 2
    finally:
        embedded.server.close()

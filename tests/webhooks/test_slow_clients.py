"""Slow clients cannot take the bot offline: `serve` and the README's gunicorn command answer.

Fifty connections trickle their requests (half the header lines, half the body) while a
normal `/healthz` and a signed delivery must still answer (within GitHub's 10 s, the client's
timeout here; bench/slow_clients.py measures how fast); a connection that stalls is closed by
the server, not before its timeout.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import shlex
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


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def production_command(port: int) -> list[str]:
    """The README's production gunicorn command, bound to a local port."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
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


@pytest.fixture(params=["serve", "production"])
def server(request, engine: Engine, database_url: str, tmp_path: Path) -> Iterator[tuple[str, int]]:
    """`playbook-bot serve` or the production command on the test database; (target, port)."""
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PLAYBOOK_", "GITHUB_"))}
    env |= {
        "GITHUB_WEBHOOK_SECRET": GITHUB_SECRET,
        "PLAYBOOK_DATABASE_URL": database_url,
        "PROMETHEUS_MULTIPROC_DIR": str(tmp_path / "metrics"),
        "PLAYBOOK_API_TOKEN": TOKEN,
    }
    (tmp_path / "metrics").mkdir()
    target = request.param
    args = serve_command(port) if target == "serve" else production_command(port)
    process = subprocess.Popen(
        args,
        cwd=tmp_path,
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
        process.terminate()
        process.communicate(timeout=30)


class Trickle:
    """Connections that send a request a piece at a time and never finish it."""

    def __init__(self, port: int, count: int, interval: float = 3.0) -> None:
        self.port = port
        self.stop = threading.Event()
        self.sockets: list[socket.socket] = []
        for n in range(count):
            sock = socket.create_connection(("127.0.0.1", port), timeout=5)
            head = f"POST /webhooks/github HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
            if n % 2:  # complete headers, then a body that never ends
                head += "Content-Type: application/json\r\nContent-Length: 100000\r\n\r\n{"
            sock.sendall(head.encode())
            self.sockets.append(sock)
        self.thread = threading.Thread(target=self._run, args=(interval,), daemon=True)
        self.thread.start()

    def _run(self, interval: float) -> None:
        n = 0
        while not self.stop.wait(interval):
            n += 1
            for index, sock in enumerate(self.sockets):
                piece = b" " if index % 2 else f"X-Slow-{n}: a\r\n".encode()
                # A connection the server closed stays closed: the others go on.
                with contextlib.suppress(OSError):
                    sock.sendall(piece)

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


def test_normal_requests_answer_within_a_second_while_50_clients_trickle(server) -> None:
    _target, port = server
    trickle = Trickle(port, SLOW_CLIENTS)
    try:
        # Every slow connection has been accepted and sent a piece more: a line every 3 s
        # is what took gunicorn's sync and gthread workers (the old servers) offline.
        time.sleep(4)
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


def test_a_stalled_request_is_closed_after_its_timeout(server) -> None:
    target, port = server
    head = f"POST /webhooks/github HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n".encode()
    body_head = head + b"Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"
    with ThreadPoolExecutor(2) as pool:
        headers_only = pool.submit(stalled, port, head)
        part_body = pool.submit(stalled, port, body_head)
        (header_answer, header_seconds) = headers_only.result()
        (body_answer, body_seconds) = part_body.result()
    # Each is closed (stalled() fails otherwise), and not before its timeout: a busy machine
    # only makes that later, so no upper bound is asserted.
    if target == "serve":
        # waitress closes a connection that has sent nothing for 10 s (checked every 2 s).
        assert header_answer == body_answer == b""
        assert header_seconds >= 9 and body_seconds >= 9
    else:
        # gunicorn's gevent worker gives the headers keepalive (5 s); the body gets 10 s.
        assert header_answer == b""
        assert header_seconds >= 4
        status_line, _, rest = body_answer.partition(b"\r\n")
        assert status_line == b"HTTP/1.1 408 Request Timeout", body_answer
        assert json.loads(rest.split(b"\r\n\r\n", 1)[1]) == {
            "status": "error",
            "message": "the request body did not arrive within 10 s",
        }
        assert body_seconds >= 9


def test_every_door_answers_on_this_server(server) -> None:
    # The production command runs gevent's workers (patched sockets and threads) and `serve`
    # runs waitress: the webhook, MCP (an asyncio loop behind a2wsgi) and /metrics work on both.
    _target, port = server
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
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    connection.request("GET", "/metrics", headers={"Authorization": f"Bearer {TOKEN}"})
    answer = connection.getresponse()
    text = answer.read().decode()
    connection.close()
    assert answer.status == 200
    assert 'playbook_deliveries_received_total{event="issues",source="github"} 1.0' in text

"""Run a Flask app on a loopback port in a thread, recording each request it receives."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

from flask import Flask, request
from werkzeug.serving import WSGIRequestHandler

from tests.support import start_serving, stop_serving


class _Quiet(WSGIRequestHandler):
    def log_request(self, *args: Any, **kwargs: Any) -> None:
        """Tests assert on ``requests``; an access log would only be noise."""


@dataclass
class Recorded:
    """One request as the fake server saw it."""

    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    json: Any = None


@dataclass
class Failure:
    """Answer the next matching request(s) with ``status`` instead of serving it."""

    method: str
    path: str
    status: int
    times: int = 1
    body: dict[str, Any] = field(default_factory=lambda: {"message": "injected failure"})
    headers: dict[str, str] = field(default_factory=dict)


class FakeServer:
    """Base class: subclasses add routes to ``self.app``; ``start()`` returns the base URL."""

    def __init__(self, name: str) -> None:
        self.app = Flask(name)
        self.requests: list[Recorded] = []
        self.failures: list[Failure] = []
        self._lock = threading.Lock()
        self._server: Any = None
        self._thread: Any = None
        self.url = ""

        @self.app.before_request
        def _record() -> Any:
            with self._lock:
                self.requests.append(
                    Recorded(
                        method=request.method,
                        path=request.path,
                        query=dict(request.args),
                        headers=dict(request.headers),
                        json=request.get_json(silent=True),
                    )
                )
                for failure in self.failures:
                    if (
                        failure.times > 0
                        and failure.method == request.method
                        and failure.path == request.path
                    ):
                        failure.times -= 1
                        return failure.body, failure.status, failure.headers
            return None

    def start(self) -> str:
        """Serve on 127.0.0.1 at a free port; returns the base URL."""
        self._server, self._thread = start_serving(self.app, request_handler=_Quiet)
        self.url = f"http://127.0.0.1:{self._server.server_port}"
        return self.url

    def stop(self) -> None:
        """Stop serving (at once: see ``tests.support.SHUTDOWN_POLL_SECONDS``)."""
        if self._server is not None:
            stop_serving(self._server, self._thread)
            self._server = None

    def fail(
        self,
        method: str,
        path: str,
        status: int,
        times: int = 1,
        headers: dict[str, str] | None = None,
    ) -> None:
        """Make the next ``times`` matching requests fail with ``status`` (and ``headers``)."""
        self.failures.append(Failure(method, path, status, times, headers=headers or {}))

    def calls(self, method: str | None = None, path_prefix: str = "") -> list[Recorded]:
        """Recorded requests, optionally filtered by method and path prefix."""
        return [
            r
            for r in self.requests
            if (method is None or r.method == method) and r.path.startswith(path_prefix)
        ]

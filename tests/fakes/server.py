"""Run a Flask app on a loopback port in a thread, recording each request it receives."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

from flask import Flask, request
from werkzeug.serving import WSGIRequestHandler, make_server


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
        self._server = make_server("127.0.0.1", 0, self.app, threaded=True, request_handler=_Quiet)
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self._server.server_port}"
        return self.url

    def stop(self) -> None:
        """Stop serving."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

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

"""A deadline for reading a request's body under gunicorn's gevent workers: 408 past it."""

from __future__ import annotations

import contextlib
import io
import json
import socket
from collections.abc import Callable, Iterable
from typing import Any

WSGIApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


def gevent_active() -> bool:
    """Whether this process runs on gevent (gunicorn's gevent worker patched the socket module)."""
    try:
        from gevent import monkey
    except ImportError:
        return False
    return bool(monkey.is_module_patched("socket"))


class BodyDeadline:
    """WSGI middleware: the body is read in full within ``seconds`` before the app runs.

    gunicorn's gevent worker bounds the headers (its keep-alive timeout) but hands the app a
    socket-backed ``wsgi.input``; a client that trickles its body would hold the request for
    as long as it likes. Read here under a gevent timeout, the body arrives in time or the
    client gets a 408 and the connection is closed. Elsewhere (waitress, which reads bodies
    before the app runs; tests) the request passes through untouched.
    """

    def __init__(self, app: WSGIApp, max_bytes: int, seconds: float) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.seconds = seconds
        self.enabled = gevent_active()

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        """Read the body within the deadline, then run the app on the buffered body."""
        if self.enabled and not self._read_body(environ):
            # gunicorn keeps the connection for a next request (it ignores the app's
            # Connection header) and would wait out the rest of the body first; a socket shut
            # for reading ends the connection once the 408 is written.
            sock = environ.get("gunicorn.socket")
            if sock is not None:
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RD)
            return _timed_out(start_response, self.seconds)
        return self.app(environ, start_response)

    def _read_body(self, environ: dict[str, Any]) -> bool:
        """Replace ``wsgi.input`` with the body read in memory; False if the deadline passed."""
        import gevent

        try:
            length = int(environ.get("CONTENT_LENGTH") or 0)
        except ValueError:
            return True  # the app answers a malformed length
        chunked = "chunked" in environ.get("HTTP_TRANSFER_ENCODING", "").lower()
        if length > self.max_bytes or (length <= 0 and not chunked):
            # Too large: the app refuses it by its header, unread. No body: nothing to wait for.
            return True
        # A chunked body is read one byte past the limit, so the app still sees it is too large.
        wanted = length if length > 0 else self.max_bytes + 1
        with gevent.Timeout(self.seconds, False):
            body = environ["wsgi.input"].read(wanted)
            environ["wsgi.input"] = io.BytesIO(body)
            return True
        return False


def _timed_out(start_response: Callable[..., Any], seconds: float) -> list[bytes]:
    message = f"the request body did not arrive within {seconds:g} s"
    body = json.dumps({"status": "error", "message": message}).encode()
    start_response(
        "408 Request Timeout",
        [
            ("Content-Type", "application/json"),
            ("Content-Length", str(len(body))),
            # The rest of the body may still be on its way: the connection cannot be reused.
            ("Connection", "close"),
        ],
    )
    return [body]

"""MCP over streamable HTTP at /mcp, behind the agent API's bearer tokens."""

from __future__ import annotations

import asyncio
import io
import logging
import os
import threading
from typing import Any

from flask import Blueprint, Flask, Response, current_app, request

from bot import callers
from webhooks.runtime import Runtime, error, runtime

blueprint = Blueprint("mcp_http", __name__)

MCP_PATH = "/mcp"
_EXTENSION = "playbook_mcp"
_build_lock = threading.Lock()
# One event loop per process runs every app's MCP requests (a2wsgi hands each request to it
# from the WSGI thread); it starts on first use, so a forking server starts it in each worker.
_loop: tuple[int, asyncio.AbstractEventLoop] | None = None


def _event_loop() -> asyncio.AbstractEventLoop:
    """The process's MCP event loop, running in a daemon thread (a new one after a fork)."""
    global _loop
    if _loop is None or _loop[0] != os.getpid():
        loop = asyncio.new_event_loop()
        threading.Thread(target=loop.run_forever, name="mcp-http", daemon=True).start()
        _loop = (os.getpid(), loop)
    return _loop[1]


def _wsgi_app(app: Flask, state: Runtime) -> Any:
    """The app's MCP server as a WSGI app, built once, with the app's settings and engine."""
    with _build_lock:
        wsgi = app.extensions.get(_EXTENSION)
        if wsgi is None:
            wsgi = _build(state)
            app.extensions[_EXTENSION] = wsgi
        return wsgi


def _build(state: Runtime) -> Any:
    from a2wsgi import ASGIMiddleware
    from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
    from mcp.server.transport_security import TransportSecuritySettings

    from bot.mcp_server import bearer_caller, build_server

    # The runtime, not runtime(): tools run on the MCP loop's threads, outside the app context.
    server = build_server(state.settings, lambda: state.engine, bearer_caller(state.settings))
    # The session manager drives the low-level server MCPServer wraps. The public way to it,
    # MCPServer.streamable_http_app(), is a Starlette app that only works once its lifespan
    # has started, which nothing under a WSGI server would do.
    lowlevel = server._lowlevel_server
    # DNS-rebinding protection checks Host and Origin against a list of names. It guards
    # servers that trust whoever can reach them (a local server a web page could talk to);
    # here every request must carry a bearer token, which a browser never adds on its own,
    # and deployments sit behind host names this process cannot know.
    security = TransportSecuritySettings(enable_dns_rebinding_protection=False)
    # A manager per request (below) would log its start and stop at INFO on every request.
    logging.getLogger("mcp.server.streamable_http_manager").setLevel(logging.WARNING)

    async def serve(scope: Any, receive: Any, send: Any) -> None:
        # Stateless with JSON answers: each POST is one exchange, so any worker process can
        # answer any request, and nothing is kept between requests. A manager runs once, so
        # each request gets its own; creating one costs a task group, nothing more.
        manager = StreamableHTTPSessionManager(
            app=lowlevel, stateless=True, json_response=True, security_settings=security
        )
        async with manager.run():
            await manager.handle_request(scope, receive, send)

    return ASGIMiddleware(serve, loop=_event_loop())


@blueprint.route(MCP_PATH, methods=["POST", "GET", "DELETE"])
def mcp() -> Any:
    """The MCP endpoint: JSON-RPC over POST, for a maintainer or agent bearer token."""
    state = runtime()
    settings = state.settings
    if not settings.api_token and not settings.agents_by_token:
        return error(
            503,
            "MCP over HTTP is disabled; set PLAYBOOK_API_TOKEN (maintainer) or "
            "PLAYBOOK_AGENT_TOKENS (agents) to enable it",
        )
    if callers.from_authorization(settings, request.headers.get("Authorization")) is None:
        body, status = error(
            401,
            "send Authorization: Bearer <token>, a PLAYBOOK_API_TOKEN or PLAYBOOK_AGENT_TOKENS "
            "token",
        )
        body.headers["WWW-Authenticate"] = 'Bearer realm="playbook-bot"'
        return body, status
    if request.method != "POST":
        # Stateless: there is no session to end (DELETE) and nothing the server would push on
        # a standalone stream (GET), which would only hold a worker thread open. The spec
        # lets a server answer both with 405, and clients carry on over POST.
        body, status = error(405, "this MCP server is stateless; send JSON-RPC requests by POST")
        body.headers["Allow"] = "POST"
        return body, status
    # Read through Flask, which enforces MAX_CONTENT_LENGTH and undoes chunked encoding, then
    # hand the MCP transport the body with its exact length, at the path it serves.
    data = request.get_data(cache=False)
    environ = {
        **request.environ,
        "wsgi.input": io.BytesIO(data),
        "CONTENT_LENGTH": str(len(data)),
        "SCRIPT_NAME": "",
        "PATH_INFO": MCP_PATH,
    }
    wsgi = _wsgi_app(current_app._get_current_object(), state)  # type: ignore[attr-defined]
    # Buffered: a JSON answer is one small body, and the adapter finishes its request only
    # once the whole body has been read.
    return Response.from_app(wsgi, environ, buffered=True)

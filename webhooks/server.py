"""`playbook-bot serve`: waitress serving the app, with the worker in the same process."""

from __future__ import annotations

import logging
import os
import resource
import signal
import socket
import threading
from types import FrameType, SimpleNamespace
from typing import Any

from waitress.server import create_server

from bot.config import Settings
from bot.services import Services
from bot.worker import start_thread
from webhooks import setup
from webhooks.app import create_app

log = logging.getLogger(__name__)

# A connection that sends nothing for PLAYBOOK_CLIENT_TIMEOUT_SECONDS (10) is closed, whatever
# it was in the middle of (headers, a body, or idle between requests). waitress looks for such
# connections every fifth of that, in whole seconds: one is closed within 10-12 s.
CLEANUP_FRACTION = 5
# Headers of a request, all of them: a URL of a search in a non-Latin script percent-encodes
# to 9-12 bytes a character and still fits, with room for the headers a proxy adds.
MAX_HEADER_BYTES = 64 * 1024
# Open connections at once, below the process's file limit (the database, logs and the
# listening socket need some): past it waitress stops accepting until one closes.
MAX_CONNECTIONS = 1000
RESERVED_FILES = 64


def is_ipv6(host: str) -> bool:
    """Whether ``host`` is an IPv6 address (which binds on an AF_INET6 socket)."""
    try:
        socket.inet_pton(socket.AF_INET6, host)
    except (OSError, ValueError):
        return False
    return True


def check_bind(host: str, port: int) -> None:
    """Raise the OSError binding ``host:port`` meets, before anything starts.

    Binding the way waitress binds (SO_REUSEADDR, so a port in TIME_WAIT after a restart is
    still free) fails at once on a port in use, a privileged port or an address that is not
    this machine's, before `serve` says it listens or starts its worker.
    """
    family = socket.AF_INET6 if is_ipv6(host) else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        probe.bind((host, port))


def connection_limit() -> int:
    """How many connections waitress may hold open: MAX_CONNECTIONS, or fewer if files are few."""
    soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return MAX_CONNECTIONS
    return max(16, min(MAX_CONNECTIONS, soft - RESERVED_FILES))


class EmbeddedServer:
    """One process: waitress answers requests on a few threads, one worker thread processes.

    waitress reads every request whole (headers and body) in its event loop before a thread
    runs the app, so a client that trickles its request holds a socket, not a thread: slow
    or stalled clients cannot take the answers to GitHub away. A single process keeps
    SQLite's one-writer rule easy.
    """

    def __init__(self, settings: Settings, host: str, port: int, threads: int = 4) -> None:
        self.settings = settings
        self.application = create_app(settings)
        # The one-time token of the setup page, when no GitHub App is set up yet (else None).
        self.setup_token = setup.announce(self.application, echo=False)
        self._stop = threading.Event()
        self._scheduler: Any = None
        self.server = create_server(
            self.application,
            host=host,
            port=port,
            threads=threads,
            connection_limit=connection_limit(),
            channel_timeout=settings.client_timeout_seconds,
            cleanup_interval=max(1, settings.client_timeout_seconds // CLEANUP_FRACTION),
            max_request_header_size=MAX_HEADER_BYTES,
            # Bodies up to twice the app's own limit reach the app, whose answer names
            # PLAYBOOK_MAX_BODY_BYTES; waitress refuses larger ones unread.
            max_request_body_size=2 * settings.max_body_bytes,
            # select() cannot watch descriptors past 1024; poll() can.
            asyncore_use_poll=True,
        )

    def run(self) -> None:
        """Serve until SIGTERM or SIGINT, with the inbox worker and the scheduled jobs running."""
        from bot import scheduler

        # waitress ends its loop on SystemExit: SIGTERM stops `serve` as Ctrl-C does.
        signal.signal(signal.SIGTERM, _exit)
        engine = self.application.extensions["playbook"].engine
        services = Services(engine=engine, settings=self.settings)
        start_thread(services, self._stop)
        if self.settings.model_enabled or self.settings.embeddings_enabled:
            # Model jobs on a worker of their own: a slow model never holds up a delivery.
            start_thread(services, self._stop, queue="model")
        self._scheduler = scheduler.start(engine, self.settings)
        try:
            self.server.run()
        finally:
            self.stop()

    def stop(self) -> None:
        """Stop the worker and the scheduler, close the server and forget this process's gauges."""
        from bot import metrics

        self._stop.set()
        if self._scheduler is not None:
            self._scheduler.shutdown(wait=False)
            self._scheduler = None
        self.server.close()
        # With PROMETHEUS_MULTIPROC_DIR shared with worker processes, this process's live
        # gauges leave the sums when it stops, as gunicorn's child_exit does for its workers.
        metrics.child_exit(None, SimpleNamespace(pid=os.getpid()))


def _exit(_signum: int, _frame: FrameType | None) -> None:
    raise SystemExit(0)

"""`playbook-bot serve`: gunicorn serving the app, with the worker in the same process."""

from __future__ import annotations

import logging
import socket
import threading
from typing import Any

from gunicorn.app.base import BaseApplication
from gunicorn.util import is_ipv6

from bot.config import Settings
from bot.services import Services
from bot.worker import start_thread
from webhooks.app import create_app

log = logging.getLogger(__name__)


def bind_address(host: str, port: int) -> str:
    """gunicorn's ``bind`` for ``host``: an IPv6 address goes in brackets, or it misreads it."""
    return f"[{host}]:{port}" if is_ipv6(host) else f"{host}:{port}"


def check_bind(host: str, port: int) -> None:
    """Raise the OSError gunicorn would meet binding ``host:port``, before anything starts.

    gunicorn would try a taken port five times a second apart, among its own log lines,
    and exit 1 after `serve` said it listens; a probe bound the way gunicorn binds
    (SO_REUSEADDR, so a port in TIME_WAIT after a restart is still free) fails at once on a
    port in use, a privileged port or an address that is not this machine's.
    """
    family = socket.AF_INET6 if is_ipv6(host) else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        probe.bind((host, port))


class EmbeddedServer(BaseApplication):  # type: ignore[misc]
    """One gunicorn process with a few request threads and one worker thread.

    A single process keeps SQLite's one-writer rule easy; threads answer webhooks
    while the worker thread processes the inbox behind them.
    """

    def __init__(self, settings: Settings, host: str, port: int, threads: int = 4) -> None:
        self.settings = settings
        self.options = {
            "bind": bind_address(host, port),
            "workers": 1,
            "worker_class": "gthread",
            "threads": threads,
            "accesslog": None,
            # gunicorn's largest request line (its default is 4,094 bytes): a search query of
            # non-Latin text percent-encodes to 9-12 bytes a character, and a line over the
            # limit gets gunicorn's HTML error page instead of the API's problem+json.
            "limit_request_line": 8190,
            "post_worker_init": self._start_worker,
            "worker_exit": self._stop_worker,
        }
        self.options.update(metrics_hooks())
        self._stop = threading.Event()
        self.application = create_app(settings)
        super().__init__()

    def load_config(self) -> None:
        """Hand our options to gunicorn."""
        for key, value in self.options.items():
            self.cfg.set(key, value)

    def load(self) -> Any:
        """The WSGI app."""
        return self.application

    def _start_worker(self, _worker: Any) -> None:
        from bot import scheduler

        engine = self.application.extensions["playbook"].engine
        start_thread(Services(engine=engine, settings=self.settings), self._stop)
        self._scheduler = scheduler.start(engine, self.settings)

    def _stop_worker(self, _server: Any, _worker: Any) -> None:
        self._stop.set()
        if getattr(self, "_scheduler", None) is not None:
            self._scheduler.shutdown(wait=False)


def metrics_hooks() -> dict[str, Any]:
    """gunicorn hooks for the metrics: a worker that exits leaves the multiprocess sum right.

    `serve` runs one gunicorn worker, which gunicorn starts again if it dies; with
    PROMETHEUS_MULTIPROC_DIR set, the new worker's values are summed with the old one's.
    """
    from bot import metrics

    return {"child_exit": metrics.child_exit}

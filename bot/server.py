"""`playbook-bot serve`: gunicorn serving the app, with the worker in the same process."""

from __future__ import annotations

import logging
import threading
from typing import Any

from gunicorn.app.base import BaseApplication

from bot.config import Settings
from bot.worker import Services, start_thread
from webhooks.app import create_app

log = logging.getLogger(__name__)


class EmbeddedServer(BaseApplication):  # type: ignore[misc]
    """One gunicorn process with a few request threads and one worker thread.

    A single process keeps SQLite's one-writer rule easy; threads answer webhooks
    while the worker thread processes the inbox behind them.
    """

    def __init__(self, settings: Settings, host: str, port: int, threads: int = 4) -> None:
        self.settings = settings
        self.options = {
            "bind": f"{host}:{port}",
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

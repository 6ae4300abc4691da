"""The worker: claims inbox deliveries, runs their handlers, retries with backoff, dead letters."""

from __future__ import annotations

import logging
import os
import socket
import threading
import traceback
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from sqlalchemy import Engine, exc

from bot.config import Settings
from bot.effects import Effects, LiveEffects
from bot.handlers import IGNORED, Event, PermanentError, router
from bot.handlers.router import Router
from bot.logs import delivery_context
from playbook import db, inbox
from playbook.errors import DatabaseUnavailable, PlaybookError
from playbook.models import Installation
from playbook.retrieval import Retriever

log = logging.getLogger(__name__)


# Errors that say the payload or our data is wrong; a retry would fail the same way.
PERMANENT = (PermanentError, PlaybookError, KeyError, TypeError, ValueError)


def is_transient(error: BaseException) -> bool:
    """Whether a retry may succeed: network trouble, 5xx, rate limits, a database blip."""
    if isinstance(error, DatabaseUnavailable | exc.OperationalError):
        return True
    status = getattr(error, "status", None) or getattr(error, "status_code", None)
    if isinstance(status, int):
        return status >= 500 or status in (403, 408, 429)  # GitHub rate limits answer 403/429
    return not isinstance(error, PERMANENT)


@dataclass
class Services:
    """What handlers may use: the database, settings, side effects and the retriever."""

    engine: Engine
    settings: Settings
    effects: Effects | None = None
    retriever: Retriever = field(default_factory=Retriever)

    def __post_init__(self) -> None:
        if self.effects is None:
            self.effects = LiveEffects(self.settings)

    @property
    def out(self) -> Effects:
        """The side effects (live unless a dry run was asked for)."""
        assert self.effects is not None
        return self.effects


class Worker:
    """Claims due deliveries and processes each exactly once per successful attempt."""

    def __init__(
        self,
        services: Services,
        *,
        name: str | None = None,
        handlers: Router = router,
    ) -> None:
        self.services = services
        self.name = name or f"{socket.gethostname()}:{os.getpid()}:{threading.get_ident()}"
        self.handlers = handlers
        settings = services.settings
        self.lease = timedelta(seconds=settings.worker_lease_seconds)
        self.policy = inbox.RetryPolicy(
            max_attempts=settings.max_attempts,
            base_delay=timedelta(seconds=settings.retry_base_seconds),
        )

    def run_once(self) -> int:
        """Claim one batch and process it; returns how many deliveries were claimed."""
        with db.transaction(self.services.engine) as session:
            claimed = inbox.claim(
                session, self.name, limit=self.services.settings.worker_batch, lease=self.lease
            )
            batch = [(d.id, d.delivery_id, Event.from_delivery(d)) for d in claimed]
        for row_id, delivery_id, event in batch:
            with delivery_context(delivery_id):
                self._process(row_id, event)
        return len(batch)

    def _removed_installation(self, event: Event) -> bool:
        # After installation.deleted the bot has no token there; acting would only fail.
        if event.source != "github" or event.installation_id is None:
            return False
        if event.name == "installation":
            return False
        with db.transaction(self.services.engine) as session:
            installation = session.get(Installation, event.installation_id)
        return installation is not None and installation.status == "deleted"

    def _process(self, row_id: int, event: Event) -> None:
        label = f"{event.source} {event.name}{f'.{event.action}' if event.action else ''}"
        removed = self._removed_installation(event)
        handlers = [] if removed else self.handlers.handlers_for(event)
        if removed:
            log.info("%s is for removed installation %s; ignored", label, event.installation_id)
        elif not handlers:
            if (event.source, event.name) in IGNORED:
                log.info("%s is on the ignore list", label)
            else:
                log.info("no handler for %s; ignored", label)
        try:
            for handler in handlers:
                handler(event, self.services)
        except Exception as error:
            retry = is_transient(error)
            detail = "".join(traceback.format_exception_only(error)).strip()
            with db.transaction(self.services.engine) as session:
                status = inbox.fail(session, row_id, detail, retry=retry, policy=self.policy)
            level = logging.ERROR if status == "dead" else logging.WARNING
            log.log(level, "%s failed (%s): %s", label, status, detail, exc_info=status == "dead")
            return
        with db.transaction(self.services.engine) as session:
            inbox.complete(session, row_id)
        if handlers:
            log.info("%s done", label)

    def run(self, stop: threading.Event) -> None:
        """Process deliveries until ``stop`` is set, sleeping when the inbox is empty."""
        log.info("worker %s started", self.name)
        while not stop.is_set():
            try:
                busy = self.run_once()
            except (DatabaseUnavailable, exc.OperationalError, exc.InterfaceError) as error:
                log.error("worker cannot reach the database: %s", error)
                busy = 0
            if not busy:
                stop.wait(self.services.settings.worker_poll_seconds)
        log.info("worker %s stopped", self.name)


def start_thread(services: Services, stop: threading.Event, **kwargs: Any) -> threading.Thread:
    """Run a worker in a daemon thread (the embedded worker of `serve`)."""
    worker = Worker(services, **kwargs)
    thread = threading.Thread(target=worker.run, args=(stop,), name="playbook-worker", daemon=True)
    thread.start()
    return thread

"""The worker: claims inbox deliveries, runs their handlers, retries with backoff, dead letters."""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import traceback
import uuid
from collections import deque
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, TypeVar

from sqlalchemy.orm import Session

from bot import claims, metrics
from bot.claims import Claim, LeaseKeeper
from bot.handlers import IGNORED, Event, router
from bot.handlers.router import Router
from bot.logs import delivery_context, redact
from bot.outcomes import Deferred, Ignored, LeaseLost, PermanentError, classify, describe
from bot.services import Services
from playbook import clock, db
from playbook.deliveries import heartbeats, inbox, installations
from playbook.models import Delivery

log = logging.getLogger(__name__)
T = TypeVar("T")

__all__ = ["PermanentError", "Services", "Worker", "start_thread"]


@dataclass(frozen=True)
class Row:
    """An inbox row as the worker takes it: plain values, parsed only once it is claimed."""

    id: int
    delivery_id: str
    source: str
    event: str
    action: str | None
    payload: str
    installation_id: int | None
    ticket_key: str | None

    @classmethod
    def of(cls, delivery: Delivery) -> Row:
        """Copy the fields the worker needs out of a claimed row."""
        return cls(
            delivery.id,
            delivery.delivery_id,
            delivery.source,
            delivery.event,
            delivery.action,
            delivery.payload,
            delivery.installation_id,
            delivery.ticket_key,
        )

    @property
    def label(self) -> str:
        """``github pull_request.closed``, for log lines."""
        return f"{self.source} {self.event}{f'.{self.action}' if self.action else ''}"


class Worker:
    """Claims due deliveries and records exactly one outcome for each attempt it finishes."""

    def __init__(
        self,
        services: Services,
        *,
        name: str | None = None,
        handlers: Router = router,
        lanes: int | None = None,
    ) -> None:
        self.services = services
        # A random part: thread ids are reused, and a restarted worker is a new lease holder.
        self.name = name or f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self.handlers = handlers
        settings = services.settings
        self.lease = timedelta(seconds=settings.worker_lease_seconds)
        self.policy = inbox.RetryPolicy(
            max_attempts=settings.max_attempts,
            base_delay=timedelta(seconds=settings.retry_base_seconds),
        )
        self.keeper = LeaseKeeper(services.engine, self.name, self.lease, clock.now())
        if lanes is None:
            # SQLite has one writer at a time: a second lane would only queue on its lock.
            lanes = DEFAULT_LANES if services.engine.dialect.name == "postgresql" else 1
        self.lanes = max(lanes, 1)
        self._pool: ThreadPoolExecutor | None = None
        # The batch in hand, and its installations that were removed.
        self._batch: list[Row] = []
        self._removed: set[int] = set()

    def run_once(self) -> int:
        """Claim one batch and process it; returns how many deliveries were claimed."""
        with db.transaction(self.services.engine) as session:
            claimed = inbox.claim(
                session,
                self.name,
                limit=self.services.settings.worker_batch,
                lease=self.lease,
                max_attempts=self.policy.max_attempts,
            )
            batch = [Row.of(delivery) for delivery in claimed]
            # Read once per batch, in the claim's transaction, not once per delivery.
            self._removed = _removed_installations(session, batch)
        if not batch:
            return 0
        self._batch = batch
        groups = _by_ticket([Work.of(row) for row in batch], self.lanes)
        with self.keeper.holding([row.id for row in batch]):
            if len(groups) == 1:
                self._run_group(groups[0])
            else:
                self._run_lanes(groups)
        return len(batch)

    def _run_lanes(self, groups: list[list[Work]]) -> None:
        # The lanes' database round trips and commits overlap, which is where a delivery's
        # time goes. Each lane takes the next ticket's deliveries when it is free, so one
        # slow delivery holds up only its own ticket; one lane runs here, the others in the pool.
        pending = deque(groups)

        def lane() -> None:
            while True:
                try:
                    group = pending.popleft()
                except IndexError:
                    return
                self._run_group(group)

        if self._pool is None:
            self._pool = ThreadPoolExecutor(self.lanes - 1, thread_name_prefix="playbook-lane")
        futures = [self._pool.submit(lane) for _ in range(min(self.lanes, len(groups)) - 1)]
        try:
            lane()
        finally:
            wait(futures)
        for future in futures:
            # What escaped _process (SystemExit from a library) ends the worker as it would
            # without lanes, once every lane has stopped.
            future.result()

    def _run_group(self, group: list[Work]) -> None:
        for work in group:
            with delivery_context(work.row.delivery_id):
                self._process(work.row, _parse(work.row))
            if work.installation:
                # The batch's later rows may be for the installation this one removed.
                with db.transaction(self.services.engine) as session:
                    self._removed = _removed_installations(session, self._batch)

    def _process(self, row: Row, parsed: Event | Exception) -> None:
        # Anything a delivery can raise ends here as an outcome of that row: no delivery,
        # however malformed, may stop the worker.
        if self.keeper.lost(row.id):
            log.warning("%s: another worker took it over; left to that worker", row.label)
            return
        started = time.perf_counter()
        claim = Claim(row.id, self.name, self.lease, self.services.engine, self.keeper)
        try:
            with claims.handling(claim):
                status, reason = self._dispatch(row, parsed)
        except LeaseLost as lost:
            log.warning("%s: %s; it posts nothing more for it", row.label, lost)
            return
        except Deferred as deferred:
            outcome = self._defer(row, str(deferred), deferred)
            metrics.finished(row.source, row.event, outcome, started)
            return
        except Exception as error:
            outcome = self._failed(row, error)
            metrics.finished(row.source, row.event, outcome, started)
            return
        finally:
            self.keeper.release(row.id)
        written, recorded = self._record(
            lambda session: inbox.complete(session, row.id, self.name, status=status, reason=reason)
        )
        if not written:
            return
        metrics.finished(row.source, row.event, status if recorded else None, started)
        if not recorded:
            log.warning("%s finished, but another worker owns it now", row.label)
        elif status == "ignored":
            log.info("%s ignored: %s", row.label, reason)
        else:
            log.info("%s done", row.label)

    def _dispatch(self, row: Row, event: Event | Exception) -> tuple[str, str | None]:
        if isinstance(event, Exception):
            raise event  # an unreadable payload (a PermanentError) ends dead, with its reason
        if self._removed_installation(event):
            return "ignored", f"installation {event.installation_id} was removed"
        handlers = self.handlers.handlers_for(event)
        if not handlers:
            if (event.source, event.name) in IGNORED:
                return "ignored", f"{row.label} is on the ignore list"
            return "ignored", f"no handler for {row.label}"
        reasons: list[str] = []
        acted = False
        for handler in handlers:
            try:
                handler(event, self.services)
            except Ignored as why:
                reasons.append(str(why))
            else:
                acted = True
        return ("done", None) if acted else ("ignored", "; ".join(reasons))

    def _removed_installation(self, event: Event) -> bool:
        # After installation.deleted the bot has no token there; acting would only fail.
        if event.source != "github" or event.name == "installation":
            return False
        return event.installation_id in self._removed

    def _failed(self, row: Row, error: Exception) -> str | None:
        """Record a failed attempt; returns the outcome recorded, or None if none was."""
        failure = classify(error)
        if failure.kind == "rate_limited" and failure.until is not None:
            return self._defer(row, failure.reason, Deferred(failure.reason, failure.until))
        reason = redact(failure.reason)
        trace = redact("".join(traceback.format_exception(error)))
        written, status = self._record(
            lambda session: inbox.fail(
                session,
                row.id,
                self.name,
                reason,
                kind=failure.kind,
                policy=self.policy,
                trace=trace,
            )
        )
        if not written:
            return None
        if status is None:
            log.warning("%s failed (%s), but another worker owns it now", row.label, reason)
            return None
        level = logging.ERROR if status == "dead" else logging.WARNING
        log.log(level, "%s %s (%s): %s", row.label, status, failure.kind, reason)
        return status

    def _defer(self, row: Row, reason: str, deferred: Deferred) -> str | None:
        """Record that the delivery waits; returns "deferred", or None if nothing was recorded."""
        written, done = self._record(
            lambda session: inbox.defer(session, row.id, self.name, deferred.until, reason)
        )
        if not (written and done):
            return None
        log.info("%s waits until %s: %s", row.label, deferred.until.isoformat(), reason)
        return "deferred"

    def _record(self, write: Callable[[Any], T]) -> tuple[bool, T | None]:
        # The outcome could not be written (database down): the row stays claimed and
        # comes back when its lease runs out, so nothing is lost or marked done wrongly.
        try:
            with db.transaction(self.services.engine) as session:
                inbox.asynchronous_commit(session)
                return True, write(session)
        except Exception as error:
            log.error(
                "cannot record the outcome (%s); the delivery is tried again after its lease",
                redact(describe(error)),
            )
            return False, None

    def run(self, stop: threading.Event) -> None:
        """Process deliveries until ``stop`` is set, sleeping when the inbox is empty."""
        log.info("worker %s started", self.name)
        self.keeper.beat()
        last_beat = time.monotonic()
        errors = 0
        while not stop.is_set():
            try:
                busy = self.run_once()
                errors = 0
            except Exception as error:
                # The loop outlives anything: a database outage, a bug while claiming.
                errors += 1
                log.error("worker cannot claim deliveries: %s", redact(describe(error)))
                busy = 0
            if time.monotonic() - last_beat >= self.keeper.interval:
                self.keeper.beat()
                last_beat = time.monotonic()
            if not busy:
                poll = self.services.settings.worker_poll_seconds
                stop.wait(min(poll * 2 ** min(errors, 5), 30) if errors else poll)
        if self._pool is not None:
            self._pool.shutdown(wait=True)
        try:
            heartbeats.stop(self.services.engine, self.name)
        except Exception as error:
            log.warning("could not remove the heartbeat: %s", type(error).__name__)
        log.info("worker %s stopped", self.name)


# Lanes of one worker on PostgreSQL: deliveries of different tickets run side by side, so
# their round trips and commit flushes overlap instead of queueing one behind the other.
DEFAULT_LANES = 4

@dataclass(frozen=True)
class Work:
    """A claimed row and the ticket it is about (told when it was received)."""

    row: Row
    ticket: str | None
    installation: bool  # a GitHub installation event: the rows after it must see its outcome

    @classmethod
    def of(cls, row: Row) -> Work:
        """The row with its stored ticket; its payload is parsed when its turn comes."""
        return cls(row, row.ticket_key, (row.source, row.event) == ("github", "installation"))


def _parse(row: Row) -> Event | Exception:
    """The row's event, or the error its payload raised (recorded as that row's outcome)."""
    try:
        return Event.from_row(row)
    except Exception as error:
        return error


def _by_ticket(work: list[Work], lanes: int) -> list[list[Work]]:
    """The batch's deliveries grouped by ticket, in order; lanes run groups side by side.

    Two deliveries for one ticket never run at once (the later would wait for the earlier's
    comment slot, and a group keeps them in order); rows whose ticket cannot be told form one
    group, in order. With one lane, or an installation event in the batch (the rows after it
    must see its outcome), the whole batch is one group.
    """
    if lanes == 1 or any(item.installation for item in work):
        return [work]
    groups: dict[str | None, list[Work]] = {}
    for item in work:
        groups.setdefault(item.ticket, []).append(item)
    return list(groups.values())


def _removed_installations(session: Session, rows: list[Row]) -> set[int]:
    """The installations of ``rows`` that were removed (GitHub deliveries only)."""
    ids = {row.installation_id for row in rows if row.source == "github" and row.installation_id}
    return installations.removed(session, ids)


def start_thread(services: Services, stop: threading.Event, **kwargs: Any) -> threading.Thread:
    """Run a worker in a daemon thread, restarted if it ever dies (the embedded worker of `serve`).

    The worker loop catches every Exception, but a handler can still end its thread (a
    stray SystemExit, say); `serve` then starts a new worker instead of silently stopping
    processing, and `/readyz` reports no fresh heartbeat until it has. It runs one lane
    unless told otherwise: it shares the process (and Python's lock) with the web threads,
    whose answers have a deadline.
    """
    kwargs.setdefault("lanes", 1)

    def supervise() -> None:
        while not stop.is_set():
            worker = Worker(services, **kwargs)
            thread = threading.Thread(
                target=worker.run, args=(stop,), name="playbook-worker", daemon=True
            )
            thread.start()
            while thread.is_alive():
                thread.join(timeout=1.0)
            if stop.is_set():
                return
            log.error("the worker thread stopped unexpectedly; starting a new one")
            stop.wait(1.0)

    supervisor = threading.Thread(target=supervise, name="playbook-supervisor", daemon=True)
    supervisor.start()
    return supervisor

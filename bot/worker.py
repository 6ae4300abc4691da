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
from playbook.errors import Conflict
from playbook.models import Delivery

log = logging.getLogger(__name__)
T = TypeVar("T")
# How often a delivery that lost a status race runs again at once, before it waits its backoff.
CONFLICT_RERUNS = 2

__all__ = ["PermanentError", "Services", "Worker", "start_thread"]


def label(delivery: Delivery) -> str:
    """``github pull_request.closed``, for log lines."""
    action = f".{delivery.action}" if delivery.action else ""
    return f"{delivery.source} {delivery.event}{action}"


class Worker:
    """Claims due deliveries and records exactly one outcome for each attempt it finishes.

    A delivery is the inbox's `Delivery` throughout: claimed, grouped by its stored ticket,
    handled (its payload parsed into the handlers' `Event` when its turn comes), recorded.
    """

    def __init__(
        self,
        services: Services,
        *,
        name: str | None = None,
        handlers: Router = router,
        lanes: int | None = None,
        queue: str = "deliveries",
    ) -> None:
        self.services = services
        # "deliveries" (webhooks and the bot's own posting jobs), "model" (model jobs: slow,
        # one at a time, on a worker of their own) or "all".
        self.queue = queue
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
        self._batch: list[Delivery] = []
        self._removed: set[int] = set()

    def run_once(self) -> int:
        """Claim one batch and process it; returns how many deliveries were claimed."""
        with db.transaction(self.services.engine) as session:
            claimed = inbox.claim(
                session,
                self.name,
                # One model job at a time: each may wait a minute on the model.
                limit=1 if self.queue == "model" else self.services.settings.worker_batch,
                lease=self.lease,
                max_attempts=self.policy.max_attempts,
                queue=self.queue,
            )
            # Claimed rows stay readable after the commit (sessions do not expire on commit).
            batch = list(claimed)
            # Read once per batch, in the claim's transaction, not once per delivery.
            self._removed = _removed_installations(session, batch)
        if not batch:
            return 0
        self._batch = batch
        groups = _by_ticket(batch, self.lanes)
        with self.keeper.holding([delivery.id for delivery in batch]):
            if len(groups) == 1:
                self._run_group(groups[0])
            else:
                self._run_lanes(groups)
        return len(batch)

    def _run_lanes(self, groups: list[list[Delivery]]) -> None:
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

    def _run_group(self, group: list[Delivery]) -> None:
        for delivery in group:
            with delivery_context(delivery.delivery_id):
                self._process(delivery, _parse(delivery))
            if _is_installation(delivery):
                # The batch's later deliveries may be for the installation this one removed.
                with db.transaction(self.services.engine) as session:
                    self._removed = _removed_installations(session, self._batch)

    def _process(self, delivery: Delivery, parsed: Event | Exception) -> None:
        # Anything a delivery can raise ends here as its outcome: no delivery, however
        # malformed, may stop the worker.
        what = label(delivery)
        if self.keeper.lost(delivery.id):
            log.warning("%s: another worker took it over; left to that worker", what)
            return
        started = time.perf_counter()
        claim = Claim(delivery.id, self.name, self.lease, self.services.engine, self.keeper)
        try:
            with claims.handling(claim):
                status, reason = self._dispatch_settled(delivery, parsed)
        except LeaseLost as lost:
            log.warning("%s: %s; it posts nothing more for it", what, lost)
            return
        except Deferred as deferred:
            outcome = self._defer(delivery, str(deferred), deferred)
            metrics.finished(delivery.source, delivery.event, outcome, started)
            return
        except Exception as error:
            outcome = self._failed(delivery, error)
            metrics.finished(delivery.source, delivery.event, outcome, started)
            return
        finally:
            self.keeper.release(delivery.id)
        written, recorded = self._record(
            lambda session: inbox.complete(
                session, delivery.id, self.name, status=status, reason=reason
            )
        )
        if not written:
            return
        metrics.finished(delivery.source, delivery.event, status if recorded else None, started)
        if not recorded:
            log.warning("%s finished, but another worker owns it now", what)
        elif status == "ignored":
            log.info("%s ignored: %s", what, reason)
        else:
            log.info("%s done", what)

    def _dispatch_settled(
        self, delivery: Delivery, event: Event | Exception
    ) -> tuple[str, str | None]:
        # A Conflict means another writer changed the lesson between our read and our write,
        # and has committed: reading again decides afresh. Handlers are idempotent (a
        # redelivery runs them again anyway), so running them again at once beats waiting a
        # backoff; a race that keeps being lost falls back to the transient retry.
        for rerun in range(CONFLICT_RERUNS + 1):
            try:
                return self._dispatch(delivery, event)
            except Conflict as lost:
                if rerun == CONFLICT_RERUNS:
                    raise
                log.info("%s lost a status race (%s); running it again", label(delivery), lost)
        raise AssertionError("unreachable")

    def _dispatch(self, delivery: Delivery, event: Event | Exception) -> tuple[str, str | None]:
        if isinstance(event, Exception):
            raise event  # an unreadable payload (a PermanentError) ends dead, with its reason
        if self._removed_installation(event):
            return "ignored", f"installation {event.installation_id} was removed"
        handlers = self.handlers.handlers_for(event)
        if not handlers:
            if (event.source, event.name) in IGNORED:
                return "ignored", f"{label(delivery)} is on the ignore list"
            return "ignored", f"no handler for {label(delivery)}"
        reasons: list[str] = []
        acted = False
        for handler in handlers:
            try:
                handler(event, self.services)
            except Ignored as why:
                reasons.append(str(why))
            else:
                acted = True
        # A part that stood aside says why even when another acted (`pr_comment: false` skips
        # the PR's comment while its tickets are still tracked): `deliveries show` tells.
        return ("done" if acted else "ignored"), "; ".join(reasons) or None

    def _removed_installation(self, event: Event) -> bool:
        # After installation.deleted the bot has no token there; acting would only fail.
        if event.source != "github" or event.name == "installation":
            return False
        return event.installation_id in self._removed

    def _failed(self, delivery: Delivery, error: Exception) -> str | None:
        """Record a failed attempt; returns the outcome recorded, or None if none was."""
        failure = classify(error)
        if failure.kind == "rate_limited" and failure.until is not None:
            return self._defer(delivery, failure.reason, Deferred(failure.reason, failure.until))
        reason = redact(failure.reason)
        trace = redact("".join(traceback.format_exception(error)))
        written, status = self._record(
            lambda session: inbox.fail(
                session,
                delivery.id,
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
            log.warning("%s failed (%s), but another worker owns it now", label(delivery), reason)
            return None
        level = logging.ERROR if status == "dead" else logging.WARNING
        log.log(level, "%s %s (%s): %s", label(delivery), status, failure.kind, reason)
        return status

    def _defer(self, delivery: Delivery, reason: str, deferred: Deferred) -> str | None:
        """Record that the delivery waits; returns "deferred", or None if nothing was recorded."""
        written, done = self._record(
            lambda session: inbox.defer(session, delivery.id, self.name, deferred.until, reason)
        )
        if not (written and done):
            return None
        log.info("%s waits until %s: %s", label(delivery), deferred.until.isoformat(), reason)
        return "deferred"

    def _record(self, write: Callable[[Any], T]) -> tuple[bool, T | None]:
        # The outcome could not be written (database down): the delivery stays claimed and
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


def _parse(delivery: Delivery) -> Event | Exception:
    """The delivery's payload as the handlers' Event, or the error it raised (recorded as
    the delivery's outcome)."""
    try:
        return Event.from_row(delivery)
    except Exception as error:
        return error


def _is_installation(delivery: Delivery) -> bool:
    """A GitHub installation event: the deliveries after it must see its outcome."""
    return (delivery.source, delivery.event) == ("github", "installation")


def _by_ticket(batch: list[Delivery], lanes: int) -> list[list[Delivery]]:
    """The batch's deliveries grouped by their stored ticket, in order; lanes run groups
    side by side.

    Two deliveries for one ticket never run at once (the later would wait for the earlier's
    comment slot, and a group keeps them in order); deliveries whose ticket cannot be told
    form one group, in order. GitHub keys (``owner/repo#12``) and Jira keys (``PB-12``) never
    look alike. With one lane, or an installation event in the batch (the deliveries after
    it must see its outcome), the whole batch is one group.
    """
    if lanes == 1 or any(_is_installation(delivery) for delivery in batch):
        return [batch]
    groups: dict[str | None, list[Delivery]] = {}
    for delivery in batch:
        groups.setdefault(delivery.ticket_key, []).append(delivery)
    return list(groups.values())


def _removed_installations(session: Session, batch: list[Delivery]) -> set[int]:
    """The installations of the batch's deliveries that were removed (GitHub's only)."""
    ids = {d.installation_id for d in batch if d.source == "github" and d.installation_id}
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

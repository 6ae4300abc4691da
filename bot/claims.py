"""The deliveries a worker holds: leases renewed in the background, checked before side effects."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import Engine

from bot.outcomes import LeaseLost
from playbook import db
from playbook.deliveries import heartbeats, inbox

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Claim:
    """One delivery in a worker's hands: the delivery (its `Delivery.id`), the worker and its
    lease."""

    delivery: int
    worker: str
    lease: timedelta
    engine: Engine
    keeper: LeaseKeeper | None = None

    @property
    def holder(self) -> str:
        """The name reservations are made under: the delivery, whichever worker runs it."""
        return f"delivery:{self.delivery}"


# The delivery being handled in this thread; None outside the worker (CLI, backfill, demo).
current: ContextVar[Claim | None] = ContextVar("current_claim", default=None)


def check() -> None:
    """Renew the current delivery's lease, or raise LeaseLost if another worker has it.

    Called before every side effect: a worker whose lease ran out and whose delivery
    another worker took must post nothing more for it.
    """
    claim = current.get()
    if claim is None:
        return
    keeper = claim.keeper
    if keeper is not None:
        if keeper.lost(claim.delivery):
            raise LeaseLost(f"delivery {claim.delivery} is now another worker's")
        if keeper.fresh():
            return  # renewed under half a lease ago: no other worker can have claimed it
    with db.transaction(claim.engine) as session:
        owned = inbox.renew(session, [claim.delivery], claim.worker, claim.lease)
    if claim.delivery not in owned:
        raise LeaseLost(f"delivery {claim.delivery} is now another worker's")
    if keeper is not None:
        keeper.touch()


@contextmanager
def handling(claim: Claim) -> Iterator[None]:
    """Make ``claim`` the current delivery of this thread for the block."""
    token = current.set(claim)
    try:
        yield
    finally:
        current.reset(token)


class LeaseKeeper:
    """Renews the leases of the deliveries a worker holds, and its heartbeat, every third of a
    lease.

    Without renewal a handler slower than the lease (a slow GitHub, a long retry) would let
    a second worker take the same delivery and act twice.
    """

    def __init__(self, engine: Engine, worker: str, lease: timedelta, started_at: datetime) -> None:
        self.engine = engine
        self.worker = worker
        self.lease = lease
        self.started_at = started_at
        self.interval = max(min(lease.total_seconds() / 3, 10.0), 0.05)
        self._held: set[int] = set()
        self._lost: set[int] = set()
        self._lock = threading.Lock()
        # When the held deliveries' leases were last taken or renewed (monotonic seconds).
        self._renewed_at = 0.0

    def touch(self) -> None:
        """Note that the held deliveries' leases were just taken or renewed."""
        self._renewed_at = time.monotonic()

    def fresh(self) -> bool:
        """Whether the leases were renewed under half a lease ago.

        A delivery's lease then still has over half its length to run in the database, so no
        other worker can have claimed it: acting needs no round trip to check.
        """
        return time.monotonic() - self._renewed_at < self.lease.total_seconds() / 2

    def lost(self, delivery: int) -> bool:
        """Whether renewal found ``delivery`` (a `Delivery.id`) taken by another worker."""
        with self._lock:
            return delivery in self._lost

    def release(self, delivery: int) -> None:
        """Stop renewing a delivery once its outcome is recorded."""
        with self._lock:
            self._held.discard(delivery)

    def renew_now(self) -> None:
        """Renew every held delivery once and beat the heart; never raises."""
        with self._lock:
            held = set(self._held)
        try:
            if held:
                started = time.monotonic()
                with db.transaction(self.engine) as session:
                    owned = inbox.renew(session, held, self.worker, self.lease)
                with self._lock:
                    self._lost |= held - owned
                    self._held &= owned
                self._renewed_at = started
            heartbeats.beat(self.engine, self.worker, self.started_at)
        except Exception as error:  # a database blip: try again next time round
            log.warning("lease renewal failed: %s", type(error).__name__)

    @contextmanager
    def holding(self, deliveries: list[int]) -> Iterator[None]:
        """Renew ``deliveries`` (`Delivery.id`s) in a background thread for the block."""
        with self._lock:
            self._held = set(deliveries)
            self._lost = set()
        self.touch()  # the claim that handed us these deliveries set their leases just now
        stop = threading.Event()

        def keep() -> None:
            while not stop.wait(self.interval):
                self.renew_now()

        thread = threading.Thread(target=keep, name=f"lease-keeper-{self.worker}", daemon=True)
        thread.start()
        try:
            yield
        finally:
            stop.set()
            thread.join(timeout=self.interval + 5)
            with self._lock:
                self._held = set()

    def beat(self) -> None:
        """Record the worker's heartbeat; never raises."""
        try:
            heartbeats.beat(self.engine, self.worker, self.started_at)
        except Exception as error:
            log.warning("heartbeat failed: %s", type(error).__name__)

"""Retention: purge old webhook payloads and logs; the playbook and its history are never purged."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import ColumnElement, delete, func, select
from sqlalchemy.orm import Session

from playbook import clock
from playbook.errors import InvalidInput
from playbook.models import Delivery, Retrieval, SideEffect

# GitHub redelivers a delivery for up to 3 days, and the inbox's (source, delivery_id) row is
# what turns a redelivery into a no-op: a shorter retention would let one be processed twice.
MIN_AGE = timedelta(days=3)

# Deliveries the worker will not touch again. pending and failed are still to be processed,
# so they are kept however old they are.
FINISHED = ("done", "ignored", "dead")


@dataclass(frozen=True)
class PurgeReport:
    """How many rows of each kind were (or, in a dry run, would be) deleted."""

    cutoff: datetime
    older_than: timedelta
    dry_run: bool
    deliveries: int
    side_effects: int
    retrievals: int

    @property
    def total(self) -> int:
        """All rows deleted, of every kind."""
        return self.deliveries + self.side_effects + self.retrievals

    def as_dict(self) -> dict[str, Any]:
        """The report as plain values, for JSON."""
        return {
            "cutoff": self.cutoff,
            "older_than_seconds": int(self.older_than.total_seconds()),
            "dry_run": self.dry_run,
            "deliveries": self.deliveries,
            "side_effects": self.side_effects,
            "retrievals": self.retrievals,
        }


def _targets(cutoff: datetime) -> list[tuple[type[Any], ColumnElement[bool]]]:
    # The only tables purged, each with the rows that may go; everything else (bullets,
    # revisions, usage events, comments, pull requests, links, installations, leases) is kept.
    return [
        (Delivery, Delivery.status.in_(FINISHED) & (Delivery.received_at < cutoff)),
        (SideEffect, SideEffect.at < cutoff),
        (Retrieval, Retrieval.at < cutoff),
    ]


def purge(session: Session, *, older_than: timedelta, dry_run: bool = False) -> PurgeReport:
    """Delete finished deliveries, side-effect and retrieval logs older than ``older_than``."""
    if older_than < MIN_AGE:
        raise InvalidInput(
            f"keep at least {MIN_AGE.days} days: GitHub redelivers a webhook for 3 days and the "
            "stored delivery ids are what make a redelivery harmless"
        )
    cutoff = clock.now() - older_than
    counts: list[int] = []
    for model, condition in _targets(cutoff):
        if dry_run:
            counting = select(func.count()).select_from(model).where(condition)
            counts.append(session.scalar(counting) or 0)
        else:
            # One DELETE per table, without loading rows: synchronize_session=False keeps the
            # ORM from selecting (or RETURNING) a million ids just to expire objects nobody holds.
            result = session.execute(
                delete(model).where(condition), execution_options={"synchronize_session": False}
            )
            counts.append(result.rowcount)  # type: ignore[attr-defined]
    return PurgeReport(cutoff, older_than, dry_run, *counts)


def span_text(span: timedelta) -> str:
    """A span in words: whole days as days, anything else as hours."""
    seconds = int(span.total_seconds())
    if seconds % 86400 == 0:
        days = seconds // 86400
        return f"{days} day" if days == 1 else f"{days} days"
    hours = seconds / 3600
    return f"{hours:g} hours"


def summary(report: PurgeReport) -> str:
    """One line with the count of each kind, as the CLI prints and the scheduled job logs it."""
    verb = "would delete" if report.dry_run else "deleted"
    return (
        f"{verb} {report.deliveries} finished deliveries, {report.side_effects} side-effect "
        f"records, {report.retrievals} retrieval logs older than {span_text(report.older_than)}"
    )

"""Reconcile: ask GitHub to redeliver webhooks that failed and never reached the inbox.

GitHub does not retry a failed delivery by itself and keeps the record for 3 days, so
a receiver that was down for an hour loses those events unless someone asks again.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import timedelta

from github.HookDelivery import HookDeliverySummary
from github.PaginatedList import PaginatedList
from sqlalchemy.engine import Engine

from bot.github import GitHubClients
from playbook import clock, db
from playbook.deliveries import inbox

log = logging.getLogger(__name__)


@dataclass
class ReconcileReport:
    """What reconcile found and did."""

    checked: int = 0
    failed: int = 0
    already_in_inbox: int = 0
    redelivered: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


def _ok(summary: HookDeliverySummary) -> bool:
    return summary.status_code is not None and 200 <= summary.status_code < 300


def reconcile(
    engine: Engine, github: GitHubClients, since: timedelta, *, dry_run: bool = False
) -> ReconcileReport:
    """Redeliver each failed App delivery of the last ``since`` whose GUID the inbox lacks."""
    integration = github.integration()
    cutoff = clock.now() - since
    deliveries = PaginatedList(
        HookDeliverySummary, integration.requester, "/app/hook/deliveries", {"per_page": 100}
    )
    report = ReconcileReport()
    attempts: dict[str, list[HookDeliverySummary]] = {}
    for summary in deliveries:  # newest first
        if summary.delivered_at is not None and clock.to_utc(summary.delivered_at) < cutoff:
            break
        report.checked += 1
        attempts.setdefault(summary.guid, []).append(summary)
    failed = {
        guid: tries[0]
        for guid, tries in attempts.items()
        if not any(_ok(attempt) for attempt in tries)
    }
    report.failed = len(failed)
    with db.transaction(engine) as session:
        known = inbox.known(session, "github", list(failed))
    report.already_in_inbox = len(known)
    for guid, latest in failed.items():
        if guid in known:
            continue
        if dry_run:
            report.redelivered.append(guid)
            continue
        try:
            integration.requester.requestJsonAndCheck(
                "POST", f"/app/hook/deliveries/{latest.id}/attempts"
            )
            report.redelivered.append(guid)
            log.info("asked GitHub to redeliver %s (%s)", guid, latest.event)
        except Exception as error:  # one refused redelivery must not stop the others
            report.errors.append(f"{guid}: {error}")
            log.warning("redelivery of %s failed: %s", guid, error)
    return report

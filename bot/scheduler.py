"""Scheduled upkeep with APScheduler 3: prune, reconcile, retry, purge, agents-md, rating backfill,
consolidation proposals, reading reactions.

APScheduler 3 keeps its schedule in each process and cannot share a job store, so every
process schedules the jobs and a lease row decides who runs each one: a job runs only in
the process holding the scheduler lease, and never twice at once.
"""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from apscheduler.schedulers.background import BackgroundScheduler
from apscheduler.triggers.cron import CronTrigger
from sqlalchemy import Engine

from bot.config import Settings
from bot.github import GitHubClients, NotConfigured
from playbook import clock, db, upkeep
from playbook.deliveries import inbox, leases, retention

log = logging.getLogger(__name__)

LEADER = "scheduler"
LEADER_TTL = timedelta(minutes=2)
JOB_TTL = timedelta(hours=1)
# The rating backfill looks back this far (as `rate --backfill` does by default).
RATE_BACKFILL_SPAN = timedelta(days=90)
# Jobs scheduled only when a model is set: without one they have nothing to do.
NEEDS_MODEL = ("rate_backfill",)
# Scheduled only when an embedding model is set; also run soon after a start, as the rating
# backfill is, so lessons from before the model was set are queued the day it is set.
NEEDS_EMBEDDINGS = ("embed_backfill",)
# With a model, the rating backfill also runs this soon after a start: history from before the
# model was set is queued the day it is set, not at the next scheduled run. Later runs (and
# restarts) find only what is new, as every PR is queued once.
FIRST_RATE_BACKFILL = timedelta(minutes=5)


def holder_name() -> str:
    """This process, as lease holders are named."""
    return f"{socket.gethostname()}:{os.getpid()}"


def run_exclusively(engine: Engine, job: str, holder: str, work: Callable[[], object]) -> bool:
    """Run ``work`` if this process leads and no one else runs ``job``; True if it ran."""
    if not leases.acquire(engine, LEADER, holder, LEADER_TTL):
        log.debug("%s skipped: another process leads the schedule", job)
        return False
    name = f"job:{job}"
    if not leases.acquire(engine, name, holder, JOB_TTL):
        log.info("%s skipped: still running elsewhere", job)
        return False
    try:
        work()
    finally:
        leases.release(engine, name, holder)
    return True


def prune_job(engine: Engine, settings: Settings) -> None:
    """Report (or with PLAYBOOK_PRUNE_APPLY, archive) unused lessons."""
    with db.transaction(engine) as session:
        report = upkeep.prune(
            session,
            apply=settings.prune_apply,
            idle_days=settings.prune_idle_days,
            actor="scheduler",
            effect_min_tickets=settings.effect_min_tickets,
        )
    if report.blocked:
        log.info("prune: %s", report.blocked)
    else:
        verb = "archived" if report.applied else "would archive (PLAYBOOK_PRUNE_APPLY=0)"
        log.info("prune: %s %s", verb, [c.bullet_id for c in report.candidates])
    if report.harmful:
        verb = "deprecated" if report.applied else "would deprecate (PLAYBOOK_PRUNE_APPLY=0)"
        log.info("prune: %s measured harmful %s", verb, [h.bullet_id for h in report.harmful])


def reconcile_job(engine: Engine, settings: Settings) -> None:
    """Ask GitHub to redeliver failed deliveries the inbox lacks."""
    from bot.reconcile import reconcile

    try:
        report = reconcile(engine, GitHubClients(settings), timedelta(hours=72))
    except NotConfigured as missing:
        log.info("reconcile skipped: %s", missing)
        return
    log.info("reconcile: %d failed, redelivered %s", report.failed, report.redelivered)


def retry_job(engine: Engine, settings: Settings) -> None:
    """Replay deliveries of the last 72 hours that died of passing trouble (an outage may be over).

    A permanent failure (a 404, a payload that does not fit) or a bug fails the same way
    again, so those wait for a person and `deliveries replay`.
    """
    since = clock.now() - timedelta(hours=72)
    with db.transaction(engine) as session:
        count = inbox.replay_transient(session, since)
    if count:
        log.info("retry: queued %d dead deliveries again", count)


def purge_job(engine: Engine, settings: Settings) -> None:
    """Delete finished deliveries, side-effect and retrieval logs past PLAYBOOK_RETENTION_DAYS."""
    with db.transaction(engine) as session:
        report = retention.purge(session, older_than=timedelta(days=settings.retention_days))
    log.info("purge: %s", retention.summary(report))


def agents_md_job(engine: Engine, settings: Settings) -> None:
    """Sync the AGENTS.md block of every repository whose settings turn `agents_md` on."""
    from bot.agents_md import sync_all

    counts = sync_all(engine, settings)
    if counts:
        log.info(
            "agents-md: %s", ", ".join(f"{n} {action}" for action, n in sorted(counts.items()))
        )


def rate_backfill_job(engine: Engine, settings: Settings) -> None:
    """Queue rating jobs for PRs of the last 90 days that showed lessons and have no rating."""
    from bot.model_jobs import queue_backfill
    from bot.services import Services

    if not settings.model_enabled:
        return
    services = Services(engine=engine, settings=settings)
    result = queue_backfill(services, RATE_BACKFILL_SPAN, dry_run=False)
    if result.queued or result.more:
        more = "; more wait for the next run" if result.more else ""
        log.info("rate backfill: queued %d rating jobs%s", len(result.queued), more)


def embed_backfill_job(engine: Engine, settings: Settings) -> None:
    """Queue embedding jobs for active lessons with no current embedding (imports, a new model)."""
    from bot import embeddings

    if not settings.embeddings_enabled:
        return
    result = embeddings.backfill(engine, settings.embedding_model or "")
    if result.queued:
        log.info("embed backfill: queued %d embedding jobs", len(result.queued))


def consolidate_job(engine: Engine, settings: Settings) -> None:
    """Propose consolidations in every scope past 75% of its context budget."""
    from bot.consolidate import run
    from bot.services import Services

    report = run(Services(engine=engine, settings=settings))
    for scope in report.scopes:
        if not scope.skipped:
            made = ", ".join(f"#{p['id']} {'+'.join(p['member_ids'])}" for p in scope.proposals)
            log.info(
                "consolidate: %s at %d / %d chars, %d proposals%s%s",
                scope.scope,
                scope.chars,
                scope.budget,
                len(scope.proposals),
                f" ({made})" if made else "",
                f"; {scope.queued} merge jobs queued" if scope.queued else "",
            )


def reactions_job(engine: Engine, settings: Settings) -> None:
    """Read 👍/👎 on recent GitHub lessons comments as fit verdicts (PLAYBOOK_REACTIONS_BATCH)."""
    from bot.reactions import sweep
    from bot.services import Services

    missing = GitHubClients(settings).missing()
    if missing is not None:
        log.info("reactions skipped: GitHub is not configured (set %s)", missing)
        return
    report = sweep(Services(engine=engine, settings=settings), settings.reactions_batch)
    log.info("reactions: %s", report.summary())


JOBS: dict[str, tuple[str, Callable[[Engine, Settings], None]]] = {
    "prune": ("prune_schedule", prune_job),
    "reconcile": ("reconcile_schedule", reconcile_job),
    "retry": ("retry_schedule", retry_job),
    "purge": ("purge_schedule", purge_job),
    "agents_md": ("agents_md_schedule", agents_md_job),
    "rate_backfill": ("rate_backfill_schedule", rate_backfill_job),
    "consolidate": ("consolidate_schedule", consolidate_job),
    "embed_backfill": ("embed_backfill_schedule", embed_backfill_job),
    "reactions": ("reactions_schedule", reactions_job),
}


def start(
    engine: Engine, settings: Settings, holder: str | None = None
) -> BackgroundScheduler | None:
    """Start the schedule in this process (a no-op when PLAYBOOK_SCHEDULER=0)."""
    if not settings.scheduler_enabled:
        return None
    holder = holder or holder_name()
    scheduler = BackgroundScheduler(timezone="UTC")
    jobs = [
        job
        for job in JOBS
        if (settings.model_enabled or job not in NEEDS_MODEL)
        and (settings.embeddings_enabled or job not in NEEDS_EMBEDDINGS)
    ]
    for job in jobs:
        setting, function = JOBS[job]
        trigger = CronTrigger.from_crontab(getattr(settings, setting), timezone="UTC")
        first = {"next_run_time": datetime.now(UTC) + FIRST_RATE_BACKFILL}
        scheduler.add_job(
            run_exclusively,
            trigger,
            args=(engine, job, holder, lambda f=function: f(engine, settings)),
            id=job,
            max_instances=1,
            coalesce=True,
            misfire_grace_time=300,
            **(first if job in ("rate_backfill", "embed_backfill") else {}),
        )
    scheduler.start()
    log.info("scheduler started (%s)", ", ".join(jobs))
    return scheduler

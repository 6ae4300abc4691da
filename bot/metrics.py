"""Prometheus metrics: what the receiver, the worker, side effects and model calls count, and
the database gauges read at scrape time.

Counters and histograms live in each process. Under gunicorn's several workers, or with
`playbook-bot worker` processes beside the web, set PROMETHEUS_MULTIPROC_DIR (before the
processes start) to one directory they share: prometheus-client then keeps each process's
values in a file there, and a scrape of any web process sums them all. Queue depth, the
oldest due delivery, lessons by status, live workers and repositories with bad settings files
are not kept per process at all: a collector reads them from the database when `/metrics` is
scraped, so every process reports the same numbers and no gauge needs a multiprocess mode.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Iterator
from contextlib import suppress
from datetime import timedelta
from functools import cache
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from prometheus_client import REGISTRY, CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client import multiprocess as prometheus_multiprocess
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from sqlalchemy import Engine, event
from sqlalchemy.orm import Session, SessionTransaction

from bot.model_client import Answer, ModelError
from playbook import db, upkeep
from playbook.deliveries import heartbeats, inbox
from playbook.models import STATUSES
from playbook.repos import stored
from playbook.search import retrieval

log = logging.getLogger(__name__)

MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"


def multiprocess_dir() -> str | None:
    """The shared metrics directory (created if missing), or None in single-process mode."""
    path = os.environ.get(MULTIPROC_ENV)
    if not path:
        return None
    with suppress(OSError):  # reported where it matters: when a value cannot be written
        Path(path).mkdir(parents=True, exist_ok=True)
    return path


# Before the first value is written: prometheus-client writes a file per process there.
multiprocess_dir()

DELIVERIES_RECEIVED = Counter(
    "playbook_deliveries_received",
    "Webhook deliveries stored in the inbox (a redelivery of a stored id is not counted again).",
    ["source", "event"],
)
DELIVERIES_FINISHED = Counter(
    "playbook_deliveries_finished",
    "Delivery attempts the worker finished, by outcome: done, ignored, failed (will be "
    "retried), dead, deferred (waits for a rate limit or another delivery of its ticket).",
    ["source", "event", "outcome"],
)
PROCESSING_SECONDS = Histogram(
    "playbook_delivery_processing_seconds",
    "Time the worker spent on one delivery attempt, handlers and outcome included.",
    ["source", "event"],
    buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120),
)
SIDE_EFFECTS = Counter(
    "playbook_side_effects",
    "Side effects on GitHub and Jira as the side-effect log records them: done (posted), "
    "skipped (credentials missing), dry_run, or failed (the call raised).",
    ["target", "action", "status"],
)
LESSONS_COMMENTS = Counter(
    "playbook_lessons_comments",
    "The bot's decisions on a new or edited ticket: posted (a comment shows lessons that reach "
    "the relevance floor) or abstained (none reached it: no comment, or the comment now says so).",
    ["target", "decision"],
)
SEARCH_SECONDS = Histogram(
    "playbook_search_seconds",
    "Time one search of the playbook took, by consumer: retrieval (the bot, for a ticket), "
    "api, agent (the agent API and /mcp), ui.",
    ["consumer"],
    buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5),
)
# A model's purposes, the label's whole range (anything else is "other"): series stay few.
MODEL_PURPOSES = ("rating", "reflection", "embedding", "merge")
MODEL_CALLS = Counter(
    "playbook_model_calls",
    "Requests made to the model endpoint (what PLAYBOOK_MODEL_DAILY_CALLS counts, retries "
    "included), by purpose and the outcome of the question they were for: ok, or the failure "
    "(timeout, rate_limited, unavailable, bad_answer, auth, not_found, bad_request).",
    ["purpose", "outcome"],
)
MODEL_TOKENS = Counter(
    "playbook_model_tokens",
    "Tokens the model endpoint reported using, by purpose and kind (prompt, completion).",
    ["purpose", "kind"],
)
MODEL_CALL_SECONDS = Histogram(
    "playbook_model_call_seconds",
    "Time one question to the model took, its retry on an unusable answer included.",
    ["purpose"],
    buckets=(0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 30, 60, 120, 300, 600),
)
MODEL_QUOTES_DROPPED = Counter(
    "playbook_model_quotes_dropped",
    "Lessons a reflection call returned whose quote is not in the review feedback (dropped).",
)
RATINGS_RECORDED = Counter(
    "playbook_ratings_recorded",
    "Model ratings stored for lessons shown and not cited, by sign (up, none, down).",
    ["sign"],
)
REACTION_READS = Counter(
    "playbook_reaction_reads",
    "Reads of the reactions on the bot's GitHub lessons comments, by outcome: read (changed; "
    "verdicts stored), unchanged (a 304, which costs no rate limit), gone (the comment was "
    "deleted), failed.",
    ["outcome"],
)
REACTION_VOTES = Counter(
    "playbook_reaction_votes",
    "👍/👎 read on the bot's lessons comments, by whether they count as a fit verdict: counted, "
    "or ignored (a bot, the bot itself, or in a public repository someone without write access).",
    ["counted"],
)

_warned = False


def _update(change: Callable[[], object]) -> None:
    """Apply one change; a metrics directory that cannot be written never stops the bot."""
    global _warned
    try:
        change()
    except OSError as error:
        if not _warned:
            _warned = True
            log.warning("metrics are not recorded (%s); check %s", error, MULTIPROC_ENV)


def received(source: str, event_name: str) -> None:
    """A new delivery was stored."""
    _update(DELIVERIES_RECEIVED.labels(source, event_name).inc)


def finished(source: str, event_name: str, outcome: str | None, started: float) -> None:
    """The worker recorded ``outcome`` for an attempt begun at ``started`` (perf_counter)."""
    if outcome is None:  # nothing was recorded: the row comes back after its lease
        return
    elapsed = time.perf_counter() - started
    _update(DELIVERIES_FINISHED.labels(source, event_name, outcome).inc)
    _update(lambda: PROCESSING_SECONDS.labels(source, event_name).observe(elapsed))


def side_effect(target: str, action: str, status: str) -> None:
    """A side effect ended as ``status`` now (a failure, which the log does not keep)."""
    _update(SIDE_EFFECTS.labels(target, action, status).inc)


def lessons_comment(target: str, decision: str) -> None:
    """The bot posted (or kept) a lessons comment, or abstained, for one ticket."""
    _update(LESSONS_COMMENTS.labels(target, decision).inc)


def model_call(purpose: str, result: Answer[Any] | ModelError) -> None:
    """One question to the model ended with ``result``: count its requests, tokens and time."""
    label = purpose if purpose in MODEL_PURPOSES else "other"
    outcome = result.reason if isinstance(result, ModelError) else "ok"
    usage = result.usage
    _update(lambda: MODEL_CALLS.labels(label, outcome).inc(usage.calls))
    _update(lambda: MODEL_TOKENS.labels(label, "prompt").inc(usage.prompt_tokens))
    _update(lambda: MODEL_TOKENS.labels(label, "completion").inc(usage.completion_tokens))
    _update(lambda: MODEL_CALL_SECONDS.labels(label).observe(result.latency_s))


def model_quotes_dropped(count: int) -> None:
    """A reflection answer held ``count`` lessons resting on words nobody wrote."""
    if count:
        _update(lambda: MODEL_QUOTES_DROPPED.inc(count))


def ratings_recorded(scores: list[float]) -> None:
    """Ratings were stored with these scores."""
    for score in scores:
        sign = "up" if score > 0 else "down" if score < 0 else "none"
        _update(RATINGS_RECORDED.labels(sign).inc)


def reaction_read(outcome: str, counted: int = 0, ignored: int = 0) -> None:
    """One comment's reactions were read (or not) with ``outcome``; votes counted and ignored."""
    _update(REACTION_READS.labels(outcome).inc)
    if counted:
        _update(lambda: REACTION_VOTES.labels("counted").inc(counted))
    if ignored:
        _update(lambda: REACTION_VOTES.labels("ignored").inc(ignored))


_PENDING_EFFECTS = "playbook_metrics_effects"


def side_effect_on_commit(session: Session, target: str, action: str, status: str) -> None:
    """Count a side-effect log line once ``session`` commits it; a rollback forgets it."""
    session.info.setdefault(_PENDING_EFFECTS, []).append((target, action, status))


@event.listens_for(Session, "after_commit")
def _count_committed(session: Session) -> None:
    for labels in session.info.pop(_PENDING_EFFECTS, ()):
        side_effect(*labels)


@event.listens_for(Session, "after_transaction_end")
def _forget_rolled_back(session: Session, transaction: SessionTransaction) -> None:
    if transaction.parent is None and not transaction.nested:
        session.info.pop(_PENDING_EFFECTS, None)


def _searched(consumer: str, seconds: float) -> None:
    # `agent:name`, `api:maintainer`: the kind of caller, not each agent, keeps the series few.
    kind = consumer.partition(":")[0][:40] or "unknown"
    _update(lambda: SEARCH_SECONDS.labels(kind).observe(seconds))


if _searched not in retrieval.search_listeners:
    retrieval.search_listeners.append(_searched)


def child_exit(_server: Any, worker: Any) -> None:
    """gunicorn's ``child_exit`` hook: forget a dead web worker's live gauges.

    prometheus-client asks for it in multiprocess mode; counters and histograms of the dead
    worker stay in the sum, as counters must.
    """
    path = multiprocess_dir()
    if path is not None:
        prometheus_multiprocess.mark_process_dead(worker.pid, path)


@cache
def package_version() -> str:
    """playbook-bot's version, from the installed package's metadata."""
    try:
        return version("playbook-bot")
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "unknown"


class DatabaseCollector(Collector):
    """Gauges read from the database when scraped: the same truth in every process."""

    def __init__(self, engine: Callable[[], Engine], heartbeat_timeout: float) -> None:
        self.engine = engine
        self.heartbeat_timeout = timedelta(seconds=heartbeat_timeout)

    def collect(self) -> Iterator[Metric]:
        """The build, whether the database answered, and what it holds."""
        build = GaugeMetricFamily(
            "playbook_build_info", "The running playbook-bot's version.", labels=["version"]
        )
        build.add_metric([package_version()], 1)
        yield build
        up = GaugeMetricFamily(
            "playbook_database_up", "1 when the playbook database answered this scrape."
        )
        try:
            engine = self.engine()
            workers, _ = heartbeats.fresh(engine, self.heartbeat_timeout)
            with db.transaction(engine) as session:
                queue = inbox.health(session)
                lessons = upkeep.lessons_by_status(session)
                unapplied, unreadable = _settings_files(session)
        except Exception as error:  # a scrape reports the outage; it never fails with it
            log.error("metrics: the database did not answer (%s)", db.describe_error(error))
            up.add_metric([], 0)
            yield up
            return
        up.add_metric([], 1)
        yield up
        yield GaugeMetricFamily(
            "playbook_queue_depth",
            "Deliveries due for processing now (pending, or failed and due for a retry).",
            value=queue.due,
        )
        yield GaugeMetricFamily(
            "playbook_queue_oldest_age_seconds",
            "How long the oldest due delivery has been due (0 when none is).",
            value=queue.oldest_due_seconds or 0.0,
        )
        yield GaugeMetricFamily(
            "playbook_deliveries_dead",
            "Dead deliveries kept for `playbook-bot deliveries replay`.",
            value=queue.dead,
        )
        yield GaugeMetricFamily(
            "playbook_workers_alive",
            "Workers whose heartbeat is within PLAYBOOK_WORKER_HEARTBEAT_TIMEOUT.",
            value=workers,
        )
        # Counts, not a series per repository: the number of repositories has no bound.
        yield GaugeMetricFamily(
            "playbook_repo_settings_problems",
            "Repositories whose .github/playbook-bot.yml (or their organisation's) has a "
            "problem: the bot uses their last good settings, or the defaults, until fixed "
            "(`playbook-bot config --repo OWNER/NAME` names it).",
            value=unapplied,
        )
        yield GaugeMetricFamily(
            "playbook_repo_settings_unreadable",
            "Repositories whose settings files GitHub did not give at the last read (no "
            "access, or GitHub unreachable): their last good settings, or the defaults, apply.",
            value=unreadable,
        )
        by_status = GaugeMetricFamily(
            "playbook_lessons", "Lessons in the playbook by status.", labels=["status"]
        )
        for status in (*STATUSES, *sorted(set(lessons) - set(STATUSES))):
            by_status.add_metric([status], lessons.get(status, 0))
        yield by_status


def _settings_files(session: Session) -> tuple[int, int]:
    """Repositories whose settings files have problems, and those not read at the last try.

    From the domain, not bot.repo_settings: that module reaches the side effects, which
    import this one.
    """
    rows = stored.troubled(session)
    return sum(1 for row in rows if row["problems"]), sum(1 for row in rows if row["error"])


def exposition(engine: Callable[[], Engine], heartbeat_timeout: float) -> bytes:
    """The scrape, in Prometheus's text format.

    A registry per scrape, as prometheus-client's multiprocess mode asks: the process's own
    metrics are registered elsewhere, so nothing is reported twice.
    """
    registry = CollectorRegistry()
    path = multiprocess_dir()
    if path is not None and Path(path).is_dir():
        prometheus_multiprocess.MultiProcessCollector(registry, path=path)
    else:
        if path is not None:
            log.warning("%s=%s is no directory; this process only", MULTIPROC_ENV, path)
        # The process's own counters and histograms, and prometheus-client's process_*.
        registry.register(REGISTRY)
    registry.register(DatabaseCollector(engine, heartbeat_timeout))
    return generate_latest(registry)

"""Liveness and readiness probes: the process, the database, and whether workers drain the inbox."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from flask import Blueprint, jsonify

from bot.metrics import package_version
from playbook import db
from playbook.deliveries import heartbeats, inbox
from webhooks.runtime import error, runtime

blueprint = Blueprint("health", __name__)


@blueprint.get("/healthz")
def healthz() -> tuple[Any, int]:
    """The process is up, and which release it runs."""
    return jsonify(status="ok", version=package_version()), 200


@blueprint.get("/readyz")
def readyz() -> tuple[Any, int]:
    """Ready when the database answers and a worker beat within the heartbeat timeout.

    A receiver whose deliveries nobody processes only piles them up; saying so here is
    what lets an operator (or an orchestrator) notice a dead worker.
    """
    settings = runtime().settings
    timeout = timedelta(seconds=settings.worker_heartbeat_timeout)
    try:
        engine = runtime().engine
        workers, last_beat = heartbeats.fresh(engine, timeout)
        with db.transaction(engine) as session:
            queue = inbox.health(session)
    except Exception:  # any failure means "not ready", never a 500 or a database address
        return error(503, "the playbook database is unavailable", database="unavailable")
    body = {
        "database": "ok",
        "workers": workers,
        "last_heartbeat": last_beat.isoformat() if last_beat else None,
        "due": queue.due,
        "oldest_due_seconds": round(queue.oldest_due_seconds, 1)
        if queue.oldest_due_seconds is not None
        else None,
        "dead": queue.dead,
    }
    if not workers:
        return error(
            503,
            f"no worker has reported in the last {settings.worker_heartbeat_timeout:g} s; "
            "start `playbook-bot worker` (or check its log)",
            **body,
        )
    return jsonify(status="ok", **body), 200

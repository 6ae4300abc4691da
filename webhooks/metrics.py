"""`GET /metrics`: Prometheus's text format, for a scraper holding the metrics token."""

from __future__ import annotations

from typing import Any

from flask import Blueprint, Response, request
from prometheus_client import CONTENT_TYPE_LATEST

from bot import metrics
from bot.callers import same
from webhooks.runtime import error, runtime

blueprint = Blueprint("metrics", __name__)


@blueprint.get("/metrics")
def scrape() -> Response | tuple[Any, int]:
    """Counters of this host's processes and gauges read from the database.

    Queue and lesson counts say what the playbook holds, so a scrape needs a token:
    PLAYBOOK_METRICS_TOKEN, or while that is unset the maintainer's PLAYBOOK_API_TOKEN.
    """
    settings = runtime().settings
    expected = settings.metrics_token or settings.api_token
    if not expected:
        return error(
            503,
            "/metrics is off; set PLAYBOOK_METRICS_TOKEN (or PLAYBOOK_API_TOKEN) and send it "
            "as Authorization: Bearer <token>",
        )
    scheme, _, given = request.headers.get("Authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not same(given.strip(), expected):
        name = "PLAYBOOK_METRICS_TOKEN" if settings.metrics_token else "PLAYBOOK_API_TOKEN"
        body, status = error(401, f"send Authorization: Bearer <{name}>")
        body.headers["WWW-Authenticate"] = 'Bearer realm="playbook-bot metrics"'
        return body, status
    data = metrics.exposition(lambda: runtime().engine, settings.worker_heartbeat_timeout)
    return Response(data, headers={"Content-Type": CONTENT_TYPE_LATEST})

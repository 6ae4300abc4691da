"""The shared tail of both webhook endpoints: parse JSON, store in the inbox, answer."""

from __future__ import annotations

import json
import logging
from typing import Any

from flask import jsonify, request
from sqlalchemy import exc

from bot.logs import delivery_context
from playbook import db, inbox
from playbook.errors import DatabaseUnavailable
from webhooks.app import error, runtime

log = logging.getLogger(__name__)

# The headers worth keeping with a delivery, for replay and debugging.
KEPT_HEADERS = (
    "X-GitHub-Event",
    "X-GitHub-Delivery",
    "X-GitHub-Hook-ID",
    "X-GitHub-Hook-Installation-Target-ID",
    "X-GitHub-Hook-Installation-Target-Type",
    "User-Agent",
    "X-Atlassian-Webhook-Identifier",
    "X-Atlassian-Webhook-Retry",
    "X-Atlassian-Webhook-Flow",
)


def require_json() -> tuple[Any, int] | None:
    """415 unless the body is declared as JSON."""
    if request.mimetype != "application/json":
        return error(
            415,
            f"content type must be application/json, not {request.mimetype or 'missing'}; "
            "set the webhook's content type to application/json",
        )
    return None


def parse(body: bytes) -> tuple[dict[str, Any] | None, tuple[Any, int] | None]:
    """The JSON object in ``body``, or a 400 response saying what is wrong."""
    try:
        payload = json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError) as problem:
        return None, error(400, f"body is not valid JSON ({problem})")
    if not isinstance(payload, dict):
        return None, error(400, "body must be a JSON object")
    return payload, None


def store(
    *,
    source: str,
    event: str,
    action: str | None,
    delivery_id: str,
    body: bytes,
    installation_id: int | None = None,
) -> tuple[Any, int]:
    """Insert the delivery if new; 202 when stored, 200 for a duplicate, 503 if the db is down."""
    headers = {name: request.headers[name] for name in KEPT_HEADERS if name in request.headers}
    with delivery_context(delivery_id):
        try:
            with db.transaction(runtime().engine) as session:
                new = inbox.accept(
                    session,
                    source=source,
                    event=event,
                    action=action,
                    delivery_id=delivery_id,
                    payload=body.decode("utf-8"),
                    headers=headers,
                    installation_id=installation_id,
                )
        except (DatabaseUnavailable, exc.OperationalError, exc.InterfaceError) as problem:
            # 503 makes GitHub record a failed delivery (redeliverable) and Jira retry.
            log.error("cannot store delivery: %s", problem)
            return error(503, "the playbook database is unavailable; retry the delivery later")
        if not new:
            log.info("duplicate %s delivery %s ignored", source, event)
            return jsonify(status="duplicate", delivery=delivery_id), 200
        log.info("accepted %s %s%s", source, event, f".{action}" if action else "")
        return jsonify(status="accepted", delivery=delivery_id), 202

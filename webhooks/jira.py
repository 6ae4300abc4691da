"""POST /webhooks/jira: verify the secret when one is set, then store the delivery."""

from __future__ import annotations

import hashlib
import hmac
from typing import Any

from flask import Blueprint, request

from webhooks import signatures
from webhooks.app import error, runtime
from webhooks.intake import parse, require_json, store

blueprint = Blueprint("jira", __name__)


def _authorized(secret: str, body: bytes) -> bool:
    if signatures.valid(secret, body, request.headers.get("X-Hub-Signature")):
        return True
    # Jira Automation's "Send web request" cannot sign bodies, but can send a header.
    authorization = request.headers.get("Authorization", "")
    scheme, _, token = authorization.partition(" ")
    return scheme.lower() == "bearer" and hmac.compare_digest(token.strip(), secret)


@blueprint.post("/webhooks/jira")
def receive() -> tuple[Any, int]:
    """Accept one Jira webhook delivery."""
    if (problem := require_json()) is not None:
        return problem
    body = request.get_data(cache=True)
    secret = runtime().settings.jira_webhook_secret
    if secret and not _authorized(secret, body):
        if "X-Hub-Signature" not in request.headers and "Authorization" not in request.headers:
            return error(401, "missing X-Hub-Signature (or Authorization: Bearer) header")
        return error(401, "X-Hub-Signature or bearer token does not match JIRA_WEBHOOK_SECRET")
    payload, problem = parse(body)
    if problem is not None:
        return problem
    assert payload is not None
    event = payload.get("webhookEvent")
    if not isinstance(event, str) or not event.strip():
        return error(400, "payload has no webhookEvent; is this a Jira webhook?")
    # Jira retries reuse the identifier; without one, identical bodies are the same delivery.
    delivery_id = request.headers.get("X-Atlassian-Webhook-Identifier", "").strip()
    if not delivery_id:
        delivery_id = "sha256:" + hashlib.sha256(body).hexdigest()
    action = payload.get("issue_event_type_name")
    return store(
        source="jira",
        event=event.strip(),
        action=action if isinstance(action, str) else None,
        delivery_id=delivery_id,
        body=body,
    )

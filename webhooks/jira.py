"""POST /webhooks/jira: verify the signature or bearer token, then store the delivery."""

from __future__ import annotations

import hashlib
from typing import Any

from flask import Blueprint, request

from webhooks import signatures
from webhooks.intake import (
    Envelope,
    decode,
    delivery_id_field,
    name_field,
    parse,
    require_json,
    store,
    ticket_field,
)
from webhooks.runtime import error, runtime

blueprint = Blueprint("jira", __name__)


def _authorized(secret: str, body: bytes) -> bool:
    if signatures.valid(secret, body, request.headers.get("X-Hub-Signature")):
        return True
    # Jira Automation's "Send web request" cannot sign bodies, but can send a header.
    scheme, _, token = request.headers.get("Authorization", "").partition(" ")
    return scheme.lower() == "bearer" and signatures.same(token.strip(), secret)


@blueprint.post("/webhooks/jira")
def receive() -> tuple[Any, int]:
    """Accept one Jira webhook delivery."""
    settings = runtime().settings
    secret = settings.jira_webhook_secret
    if not secret and not settings.jira_allow_unsigned:
        return error(
            401,
            "JIRA_WEBHOOK_SECRET is not set, so Jira deliveries cannot be verified; set it to "
            "the webhook's secret in Jira (PLAYBOOK_JIRA_ALLOW_UNSIGNED=true accepts unsigned "
            "deliveries, for local testing only)",
        )
    require_json()
    body = request.get_data(cache=True)
    if secret and not _authorized(secret, body):
        if "X-Hub-Signature" not in request.headers and "Authorization" not in request.headers:
            return error(401, "missing X-Hub-Signature (or Authorization: Bearer) header")
        return error(401, "X-Hub-Signature or bearer token does not match JIRA_WEBHOOK_SECRET")
    text = decode(body)
    payload = parse(text)
    event = name_field(payload.get("webhookEvent"), "webhookEvent", required=True)
    assert event is not None
    # Jira retries reuse the identifier; without one, identical bodies are the same delivery.
    identifier = request.headers.get("X-Atlassian-Webhook-Identifier", "")
    delivery_id = (
        delivery_id_field(identifier, "X-Atlassian-Webhook-Identifier")
        if identifier.strip()
        else "sha256:" + hashlib.sha256(body).hexdigest()
    )
    return store(
        Envelope(
            source="jira",
            event=event,
            action=name_field(
                payload.get("issue_event_type_name"), "issue_event_type_name", required=False
            ),
            delivery_id=delivery_id,
            ticket_key=ticket_field("jira", payload),
        ),
        text,
    )

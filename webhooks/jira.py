"""POST /webhooks/jira: verify the signature or bearer token, then store the delivery."""

from __future__ import annotations

import hashlib
from typing import Any

from flask import Blueprint, current_app, request

from webhooks import setup_jira, signatures
from webhooks.intake import (
    Envelope,
    Refused,
    decode,
    delivery_id_field,
    name_field,
    parse,
    require_json,
    store,
    ticket_field,
)
from webhooks.runtime import runtime

blueprint = Blueprint("jira", __name__)


def _authorized(secret: str, body: bytes) -> str | None:
    """How the delivery proved it knows the secret, or None."""
    if signatures.valid(secret, body, request.headers.get("X-Hub-Signature")):
        return "signature verified"
    # Jira Automation's "Send web request" cannot sign bodies, but can send a header.
    scheme, _, token = request.headers.get("Authorization", "").partition(" ")
    if scheme.lower() == "bearer" and signatures.same(token.strip(), secret):
        return "bearer token verified"
    return None


@blueprint.post("/webhooks/jira")
def receive() -> tuple[Any, int]:
    """Accept one Jira webhook delivery, and tell the setup page what arrived."""
    app = current_app._get_current_object()  # type: ignore[attr-defined]
    try:
        answer, status, how, event, ticket = _receive()
    except Refused as refused:
        setup_jira.heard(app, refused.status, f"refused ({refused.status}): {refused.message}")
        raise
    if status >= 300:
        message = answer.get_json().get("message", "")
        setup_jira.heard(app, status, f"refused ({status}): {message}")
    else:
        setup_jira.heard(app, status, f"accepted, {how}", event, ticket)
    return answer, status


def _receive() -> tuple[Any, int, str, str | None, str | None]:
    """The answer, how the delivery was verified, its event and ticket; Refused if refused."""
    settings = runtime().settings
    secret = settings.jira_webhook_secret
    if not secret and not settings.jira_allow_unsigned:
        raise Refused(
            401,
            "JIRA_WEBHOOK_SECRET is not set, so Jira deliveries cannot be verified; set it to "
            "the webhook's secret in Jira (PLAYBOOK_JIRA_ALLOW_UNSIGNED=true accepts unsigned "
            "deliveries, for local testing only)",
        )
    require_json()
    body = request.get_data(cache=True)
    how = _authorized(secret, body) if secret else "unsigned (PLAYBOOK_JIRA_ALLOW_UNSIGNED)"
    if how is None:
        if "X-Hub-Signature" not in request.headers and "Authorization" not in request.headers:
            raise Refused(401, "missing X-Hub-Signature (or Authorization: Bearer) header")
        raise Refused(401, "X-Hub-Signature or bearer token does not match JIRA_WEBHOOK_SECRET")
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
    ticket = ticket_field("jira", payload)
    answer, status = store(
        Envelope(
            source="jira",
            event=event,
            action=name_field(
                payload.get("issue_event_type_name"), "issue_event_type_name", required=False
            ),
            delivery_id=delivery_id,
            ticket_key=ticket,
        ),
        text,
    )
    return answer, status, how, event, ticket

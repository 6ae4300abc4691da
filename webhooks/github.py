"""POST /webhooks/github: verify GitHub's signature, then store the delivery in the inbox."""

from __future__ import annotations

from typing import Any

from flask import Blueprint, jsonify, request

from webhooks import signatures
from webhooks.intake import (
    Envelope,
    decode,
    delivery_id_field,
    installation_field,
    name_field,
    parse,
    require_json,
    store,
    ticket_field,
)
from webhooks.runtime import error, runtime

blueprint = Blueprint("github", __name__)


@blueprint.post("/webhooks/github")
def receive() -> tuple[Any, int]:
    """Accept one GitHub webhook delivery."""
    settings = runtime().settings
    secret = settings.github_webhook_secret
    if not secret and not settings.insecure_skip_verify:
        return error(
            503,
            "GITHUB_WEBHOOK_SECRET is not set, so deliveries cannot be verified; set it to the "
            "webhook secret of the GitHub App",
        )
    raw_event = request.headers.get("X-GitHub-Event", "")
    raw_delivery = request.headers.get("X-GitHub-Delivery", "")
    missing = [
        name
        for name, value in (("X-GitHub-Event", raw_event), ("X-GitHub-Delivery", raw_delivery))
        if not value.strip()
    ]
    if missing:
        return error(400, f"missing header {' and '.join(missing)}")
    require_json()
    body = request.get_data(cache=True)
    if secret:
        header = request.headers.get("X-Hub-Signature-256")
        if not header:
            return error(401, "missing X-Hub-Signature-256 header")
        if not signatures.valid(secret, body, header):
            return error(401, "X-Hub-Signature-256 does not match the body and the secret")
    event = name_field(raw_event, "X-GitHub-Event", required=True)
    delivery_id = delivery_id_field(raw_delivery, "X-GitHub-Delivery")
    text = decode(body)
    payload = parse(text)
    if event == "ping":
        # GitHub sends ping when a hook is created; nothing to do but prove we are here.
        zen = payload.get("zen")
        return jsonify(status="pong", zen=zen[:200] if isinstance(zen, str) else None), 200
    assert event is not None
    return store(
        Envelope(
            source="github",
            event=event,
            action=name_field(payload.get("action"), "action", required=False),
            delivery_id=delivery_id,
            installation_id=installation_field(payload),
            ticket_key=ticket_field("github", payload),
        ),
        text,
    )

"""POST /webhooks/github: verify GitHub's signature, then store the delivery in the inbox."""

from __future__ import annotations

from typing import Any

from flask import Blueprint, jsonify, request

from webhooks import signatures
from webhooks.app import error, runtime
from webhooks.intake import parse, require_json, store

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
    event = request.headers.get("X-GitHub-Event", "").strip()
    delivery_id = request.headers.get("X-GitHub-Delivery", "").strip()
    if not event or not delivery_id:
        missing = [
            name
            for name, value in (("X-GitHub-Event", event), ("X-GitHub-Delivery", delivery_id))
            if not value
        ]
        return error(400, f"missing header {' and '.join(missing)}")
    if (problem := require_json()) is not None:
        return problem
    body = request.get_data(cache=True)
    if secret:
        header = request.headers.get("X-Hub-Signature-256")
        if not header:
            return error(401, "missing X-Hub-Signature-256 header")
        if not signatures.valid(secret, body, header):
            return error(401, "X-Hub-Signature-256 does not match the body and the secret")
    payload, problem = parse(body)
    if problem is not None:
        return problem
    assert payload is not None
    if event == "ping":
        # GitHub sends ping when a hook is created; nothing to do but prove we are here.
        return jsonify(status="pong", zen=payload.get("zen")), 200
    action = payload.get("action") if isinstance(payload.get("action"), str) else None
    installation = payload.get("installation")
    installation_id = installation.get("id") if isinstance(installation, dict) else None
    return store(
        source="github",
        event=event,
        action=action,
        delivery_id=delivery_id,
        body=body,
        installation_id=installation_id if isinstance(installation_id, int) else None,
    )

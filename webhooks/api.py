"""The agent API: agents outside GitHub/Jira read bullets and report loads and cites."""

from __future__ import annotations

import hmac
from typing import Any

from flask import Blueprint, jsonify, request

from playbook import db, lifecycle
from playbook.errors import BulletNotFound
from webhooks.app import error, runtime

blueprint = Blueprint("api", __name__, url_prefix="/api/v1")

BULLET_FIELDS = (
    "id",
    "text",
    "section",
    "tags",
    "scope",
    "learned_from",
    "source",
    "source_url",
    "status",
    "demoted_on",
    "demoted_reason",
    "created_at",
    "updated_at",
    "loads",
    "cites",
    "cites_success",
    "cites_failure",
    "last_loaded_at",
    "last_cited_at",
)


@blueprint.before_request
def _authenticate() -> tuple[Any, int] | None:
    token = runtime().settings.api_token
    if not token:
        return error(503, "the agent API is disabled; set PLAYBOOK_API_TOKEN to enable it")
    scheme, _, given = request.headers.get("Authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not hmac.compare_digest(given.strip(), token):
        return error(401, "send Authorization: Bearer <PLAYBOOK_API_TOKEN>")
    return None


@blueprint.get("/bullets/<bullet_id>")
def get_bullet(bullet_id: str) -> tuple[Any, int]:
    """One bullet with its counters."""
    try:
        with db.transaction(runtime().engine) as session:
            bullet = lifecycle.get(session, bullet_id)
    except BulletNotFound as problem:
        return error(404, str(problem))
    data = {field: getattr(bullet, field) for field in BULLET_FIELDS}
    for key, value in data.items():
        if hasattr(value, "isoformat"):
            data[key] = value.isoformat()
    return jsonify(status="ok", bullet=data), 200

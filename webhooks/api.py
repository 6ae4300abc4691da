"""The agent API: agents outside GitHub/Jira read bullets and report loads and cites."""

from __future__ import annotations

from typing import Any

from flask import Blueprint, jsonify, request

from playbook import db, fields, lifecycle, usage
from playbook.errors import BulletNotFound, InvalidInput, PlaybookError
from webhooks import signatures
from webhooks.app import error, runtime
from webhooks.intake import decode, parse

blueprint = Blueprint("api", __name__, url_prefix="/api/v1")
# One request's events, and the length of its Idempotency-Key.
MAX_EVENTS = 1000
MAX_KEY_CHARS = 200


@blueprint.before_request
def _authenticate() -> tuple[Any, int] | None:
    token = runtime().settings.api_token
    if not token:
        return error(503, "the agent API is disabled; set PLAYBOOK_API_TOKEN to enable it")
    scheme, _, given = request.headers.get("Authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not signatures.same(given.strip(), token):
        return error(401, "send Authorization: Bearer <PLAYBOOK_API_TOKEN>")
    return None


@blueprint.get("/bullets/<bullet_id>")
def get_bullet(bullet_id: str) -> tuple[Any, int]:
    """One bullet with its counters."""
    try:
        fields.bounded(bullet_id, "bullet id", fields.BULLET_ID_CHARS)
    except InvalidInput as problem:
        return error(400, str(problem))
    try:
        with db.transaction(runtime().engine) as session:
            bullet = lifecycle.get(session, bullet_id)
    except BulletNotFound as problem:
        return error(404, str(problem))
    data = lifecycle.as_dict(bullet)
    for key, value in data.items():
        if hasattr(value, "isoformat"):
            data[key] = value.isoformat()
    return jsonify(status="ok", bullet=data), 200


@blueprint.post("/usage")
def post_usage() -> tuple[Any, int]:
    """Record loads and cites: one event or a list, in the `.lesson-usage.jsonl` shape.

    All or nothing: one bad event rejects the request, so an agent can fix and resend it.
    Every event names its ticket (``ticketId``), and each (ticket, lesson, kind) counts
    once, so a resent request records nothing twice with or without an Idempotency-Key.
    """
    if request.mimetype != "application/json":
        return error(415, "send the events as application/json")
    body = parse(decode(request.get_data(cache=True)), lists=True)
    items = body if isinstance(body, list) else [body]
    if len(items) > MAX_EVENTS:
        return error(400, f"at most {MAX_EVENTS} events per request")
    if not items:
        return error(400, "no events in the body")
    events = []
    for position, item in enumerate(items, start=1):
        try:
            events.append(usage.parse_agent_event(item))
        except PlaybookError as problem:
            return error(400, f"event {position}: {problem}")
    # Agents written for earlier versions send an Idempotency-Key; it is still checked like
    # any header we read, though the ticket now makes every event count once by itself.
    key = request.headers.get("Idempotency-Key", "").strip()
    if len(key) > MAX_KEY_CHARS or not key.isascii():
        return error(400, f"Idempotency-Key must be at most {MAX_KEY_CHARS} ASCII characters")
    recorded = 0
    try:
        with db.transaction(runtime().engine) as session:
            for position, event in enumerate(events, start=1):
                try:
                    recorded += len(usage.record_agent_event(session, event))
                except PlaybookError as problem:
                    raise _Rejected(position, problem) from None
    except _Rejected as rejected:
        return error(422, f"event {rejected.position}: {rejected.problem}")
    return jsonify(status="recorded", events=recorded), 201


class _Rejected(Exception):
    def __init__(self, position: int, problem: PlaybookError) -> None:
        super().__init__(str(problem))
        self.position = position
        self.problem = problem

"""The shared tail of both webhook endpoints: decode, parse and check the body, store, answer."""

from __future__ import annotations

import codecs
import json
import logging
import re
from dataclasses import dataclass
from typing import Any

from flask import jsonify, request
from sqlalchemy import exc

from bot import metrics
from bot.logs import delivery_context
from playbook import db
from playbook.deliveries import inbox, tickets
from playbook.errors import DatabaseUnavailable
from webhooks.runtime import error, runtime

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
MAX_HEADER_CHARS = 1000
# Real GitHub and Jira payloads nest a dozen levels at most; deeper is an attack on parsers.
MAX_DEPTH = 100
MAX_DELIVERY_ID_CHARS = 200
MAX_NAME_CHARS = 100
# The largest id PostgreSQL's BIGINT holds; GitHub's installation ids are far below it.
MAX_INSTALLATION_ID = 2**63 - 1
# Event and action names: `pull_request`, `jira:issue_created`, `comment_created`.
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:-]*")
# Delivery ids: GitHub GUIDs, Jira identifiers, our sha256:<hex>; printable ASCII, no spaces.
_DELIVERY_ID = re.compile(r"[\x21-\x7e]+")
_UTF16_32_BOMS = (
    codecs.BOM_UTF32_LE,
    codecs.BOM_UTF32_BE,
    codecs.BOM_UTF16_LE,
    codecs.BOM_UTF16_BE,
)


class Refused(Exception):
    """A delivery refused at the edge: the HTTP status and a one-line reason naming the field."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def require_json() -> None:
    """Refuse (415) a body not declared as JSON."""
    if request.mimetype != "application/json":
        raise Refused(
            415,
            f"content type must be application/json, not {request.mimetype or 'missing'}; "
            "set the webhook's content type to application/json",
        )


def decode(body: bytes) -> str:
    """The body as text: strict UTF-8, a leading byte-order mark dropped; else Refused (400)."""
    if body.startswith(_UTF16_32_BOMS) and not body.startswith(codecs.BOM_UTF8):
        raise Refused(400, "body is UTF-16 or UTF-32; webhook bodies must be UTF-8")
    if body.startswith(codecs.BOM_UTF8):
        body = body[len(codecs.BOM_UTF8) :]
    if b"\x00" in body:
        raise Refused(
            400, "body has NUL bytes, which JSON never holds (UTF-16?); bodies must be UTF-8"
        )
    try:
        return body.decode("utf-8")
    except UnicodeDecodeError as problem:
        raise Refused(
            400, f"body is not UTF-8 (invalid byte at position {problem.start})"
        ) from None


def parse(text: str, *, lists: bool = False) -> Any:
    """The JSON object (or with ``lists``, array) in ``text``, checked for depth and unpaired
    surrogates; else Refused (400) with the reason.
    """
    try:
        payload = json.loads(text, parse_constant=_no_constant)
    except RecursionError:
        raise Refused(400, f"body is nested deeper than {MAX_DEPTH} levels") from None
    except json.JSONDecodeError as problem:
        raise Refused(
            400,
            f"body is not valid JSON ({problem.msg} at line {problem.lineno} "
            f"column {problem.colno})",
        ) from None
    except ValueError as problem:  # an integer of thousands of digits, NaN
        raise Refused(400, f"body is not valid JSON ({str(problem)[:100]})") from None
    if not isinstance(payload, dict) and not (lists and isinstance(payload, list)):
        raise Refused(400, f"body must be a JSON object{' or array' if lists else ''}")
    _check_tree(payload, surrogates="\\ud" in text.lower())
    return payload


def _no_constant(name: str) -> Any:
    # Python's json accepts NaN and Infinity; JSON does not, and neither does PostgreSQL.
    raise ValueError(f"{name} is not a JSON value")


def _check_tree(payload: dict[str, Any] | list[Any], *, surrogates: bool) -> None:
    # Iterative, so no payload can exhaust the stack; strings are only checked for unpaired
    # surrogates when the text has a \ud escape at all (strict UTF-8 rules out the rest).
    stack: list[tuple[Any, int, str]] = [(payload, 1, "")]
    while stack:
        value, depth, path = stack.pop()
        if depth > MAX_DEPTH:
            raise Refused(400, f"body is nested deeper than {MAX_DEPTH} levels")
        items = value.items() if isinstance(value, dict) else enumerate(value)
        for key, child in items:
            where = f"{path}.{key}" if path else str(key)
            if surrogates:
                for text in (key, child):
                    if isinstance(text, str) and not _encodable(text):
                        # The path may hold the surrogate itself: never echo it back.
                        shown = where[:100].encode("utf-8", "backslashreplace").decode()
                        raise Refused(400, f"{shown} holds an unpaired UTF-16 surrogate")
            if isinstance(child, dict | list):
                stack.append((child, depth + 1, where))


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def name_field(value: object, field: str, *, required: bool) -> str | None:
    """An event or action name: a short token, else Refused (400) naming ``field``."""
    if value is None or value == "":
        if required:
            raise Refused(400, f"missing {field}")
        return None
    if not isinstance(value, str):
        raise Refused(400, f"{field} must be a string")
    value = value.strip()
    if len(value) > MAX_NAME_CHARS or not _NAME.fullmatch(value):
        raise Refused(400, f"{field} must be at most {MAX_NAME_CHARS} letters, digits or _ . : -")
    return value


def delivery_id_field(value: str, field: str) -> str:
    """A delivery id: 1-200 printable ASCII characters without spaces, else Refused (400)."""
    value = value.strip()
    if not value:
        raise Refused(400, f"missing {field}")
    if len(value) > MAX_DELIVERY_ID_CHARS or not _DELIVERY_ID.fullmatch(value):
        raise Refused(400, f"{field} must be 1-{MAX_DELIVERY_ID_CHARS} printable ASCII characters")
    return value


def ticket_field(source: str, payload: dict[str, Any]) -> str | None:
    """The ticket the delivery is about (`tickets.ticket_key`); Refused (400) naming the field
    when the payload names it in a shape no tracker sends (a NUL in a Jira key, a path)."""
    found = tickets.problem(source, payload)
    if found is not None:
        field, why = found
        raise Refused(400, f"{field} {why}")
    return tickets.ticket_key(source, payload)


def installation_field(payload: dict[str, Any]) -> int | None:
    """``installation.id`` of a GitHub payload: a positive 64-bit integer or absent."""
    installation = payload.get("installation")
    if installation is None:
        return None
    if not isinstance(installation, dict):
        raise Refused(400, "installation must be an object")
    value = installation.get("id")
    if value is None:
        return None
    # bool is an int in Python; `true` is not an installation.
    valid = isinstance(value, int) and not isinstance(value, bool)
    if not valid or not 0 < value <= MAX_INSTALLATION_ID:
        raise Refused(400, "installation.id must be a positive 64-bit integer")
    return value


@dataclass(frozen=True)
class Envelope:
    """What the inbox stores about a delivery besides its body, checked at the edge."""

    source: str
    event: str
    action: str | None
    delivery_id: str
    installation_id: int | None = None
    ticket_key: str | None = None  # the ticket it is about (tickets.ticket_key)


def store(envelope: Envelope, text: str) -> tuple[Any, int]:
    """Insert the delivery if new; 202 when stored (or a dead one redelivered is queued again),
    200 for a duplicate, 503 if the db is down."""
    headers = {
        name: request.headers[name][:MAX_HEADER_CHARS]
        for name in KEPT_HEADERS
        if name in request.headers
    }
    with delivery_context(envelope.delivery_id):
        try:
            with db.transaction(runtime().engine) as session:
                new = inbox.accept(
                    session,
                    source=envelope.source,
                    event=envelope.event,
                    action=envelope.action,
                    delivery_id=envelope.delivery_id,
                    payload=text,
                    headers=headers,
                    installation_id=envelope.installation_id,
                    ticket_key=envelope.ticket_key,
                )
        except (DatabaseUnavailable, exc.OperationalError, exc.InterfaceError) as problem:
            # 503 makes GitHub record a failed delivery (redeliverable) and Jira retry.
            log.error("cannot store delivery: %s", db.describe_error(problem))
            return database_down()
        label = f"{envelope.event}{f'.{envelope.action}' if envelope.action else ''}"
        if not new:
            with db.transaction(runtime().engine) as session:
                revived = inbox.revive_dead(session, envelope.source, envelope.delivery_id, text)
            if revived:
                log.info("dead %s delivery %s redelivered: queued again", envelope.source, label)
                return jsonify(status="requeued", delivery=envelope.delivery_id), 202
            log.info("duplicate %s delivery %s ignored", envelope.source, label)
            return jsonify(status="duplicate", delivery=envelope.delivery_id), 200
        log.info("accepted %s %s", envelope.source, label)
        metrics.received(envelope.source, envelope.event)
        return jsonify(status="accepted", delivery=envelope.delivery_id), 202


def database_down() -> tuple[Any, int]:
    """The answer while the database cannot be used: 503, and never where the database is."""
    return error(503, "the playbook database is unavailable; retry the delivery later")

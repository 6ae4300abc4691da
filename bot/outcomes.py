"""How handling a delivery can end besides success, and how a failure is classified."""

from __future__ import annotations

import socket
from dataclasses import dataclass
from datetime import datetime, timedelta
from email.utils import parsedate_to_datetime
from typing import Any

import requests
from github.GithubException import GithubException
from jira.exceptions import JIRAError
from pydantic import ValidationError
from sqlalchemy import exc

from playbook import clock
from playbook.errors import Conflict, DatabaseUnavailable, PlaybookError


class PermanentError(Exception):
    """A handler failure that retrying cannot fix (the delivery goes straight to dead)."""


class Transient(Exception):
    """A failure a later try may not meet (a peer down or slow): retried with backoff."""


class Ignored(Exception):
    """The delivery needs nothing done; the message says why (shown by `deliveries list`)."""


class Deferred(Exception):
    """Try the delivery again at ``until`` without counting an attempt (rate limit, busy)."""

    def __init__(self, reason: str, until: datetime) -> None:
        super().__init__(reason)
        self.until = until


class LeaseLost(Exception):
    """Another worker owns the delivery now: this worker must not act for it any more."""


# The longest a rate limit may hold a delivery back before it is looked at again.
MAX_WAIT = timedelta(hours=1)
# Statuses a retry can fix: request timeout, conflict, too early, too many requests.
RETRYABLE_4XX = frozenset({408, 409, 425, 429})
# Network trouble from the HTTP clients: the request may or may not have arrived.
NETWORK_ERRORS = (requests.RequestException, ConnectionError, TimeoutError, socket.timeout)


@dataclass(frozen=True)
class Failure:
    """What a failure means: its kind, a one-line reason, and for rate limits when to retry."""

    kind: str  # permanent | transient | rate_limited | unexpected
    reason: str
    until: datetime | None = None


def http_status(error: BaseException) -> int | None:
    """The HTTP status of a GitHub or Jira client error, if it has one."""
    if isinstance(error, GithubException):
        return error.status
    if isinstance(error, JIRAError):
        return error.status_code
    return None


def _headers(error: BaseException) -> dict[str, str]:
    raw: Any = None
    if isinstance(error, GithubException):
        raw = error.headers
    elif isinstance(error, JIRAError):
        raw = error.headers or (error.response.headers if error.response is not None else None)
    return {str(k).lower(): str(v) for k, v in dict(raw or {}).items()}


def rate_limit_reset(error: BaseException) -> datetime | None:
    """When a rate-limited call may be made again, from Retry-After or X-RateLimit-Reset.

    GitHub answers a primary rate limit with 403 or 429 and ``x-ratelimit-remaining: 0``
    plus the reset time in epoch seconds, a secondary limit with ``retry-after``; Jira
    answers 429 with ``Retry-After``. None when the error is not a rate limit.
    """
    status = http_status(error)
    if status not in (403, 429):
        return None
    headers = _headers(error)
    now = clock.now()
    retry_after = headers.get("retry-after", "").strip()
    if retry_after:
        if retry_after.isdigit():
            return now + min(timedelta(seconds=int(retry_after)), MAX_WAIT)
        try:
            return min(clock.to_utc(parsedate_to_datetime(retry_after)), now + MAX_WAIT)
        except (TypeError, ValueError):
            return now + timedelta(minutes=1)
    if headers.get("x-ratelimit-remaining") == "0":
        reset = headers.get("x-ratelimit-reset", "")
        if reset.isdigit():
            at = clock.parse_time(int(reset))
            return max(min(at, now + MAX_WAIT), now) + timedelta(seconds=1)
        return now + timedelta(minutes=1)
    if status == 429:
        return now + timedelta(minutes=1)
    return None


def describe(error: BaseException) -> str:
    """One line about an error, never its request headers (the Jira client prints those)."""
    status = http_status(error)
    if isinstance(error, JIRAError):
        return f"Jira answered HTTP {status}: {(error.text or '').strip()[:300] or 'no message'}"
    if isinstance(error, GithubException):
        data = error.data if isinstance(error.data, dict) else {}
        message = error.message or data.get("message")
        return f"GitHub answered HTTP {status}: {str(message or 'no message')[:300]}"
    if isinstance(error, ValidationError):
        first = error.errors()[0] if error.errors() else {"loc": (), "msg": str(error)}
        where = ".".join(str(part) for part in first["loc"]) or "payload"
        return f"invalid payload: {where}: {first['msg']}"
    text = str(error).strip().splitlines()[0] if str(error).strip() else ""
    name = type(error).__name__
    return f"{name}: {text[:500]}" if text else name


def classify(error: BaseException) -> Failure:
    """Whether a retry may succeed, and when: the worker's retry decision in one place."""
    reason = describe(error)
    if isinstance(error, PermanentError | ValidationError):
        return Failure("permanent", reason)
    # A Conflict lost a race with another writer of the same status: read again on the next
    # attempt, the status decides afresh (a PR's outcome is not lost to a click at that moment).
    if isinstance(
        error,
        Transient | Conflict | DatabaseUnavailable | exc.OperationalError | exc.InterfaceError,
    ):
        return Failure("transient", reason)
    until = rate_limit_reset(error)
    if until is not None:
        return Failure("rate_limited", f"rate limited; waiting until {until:%H:%M:%S} UTC", until)
    status = http_status(error)
    if status is not None:
        if status >= 500 or status in RETRYABLE_4XX:
            return Failure("transient", reason)
        if 400 <= status < 500:
            return Failure("permanent", reason)
    if isinstance(error, NETWORK_ERRORS):
        return Failure("transient", reason)
    if isinstance(error, PlaybookError):
        return Failure("permanent", reason)
    return Failure("unexpected", reason)

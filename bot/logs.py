"""Logging set-up: human text or JSON lines, with the delivery id on every record."""

from __future__ import annotations

import logging
import re
import sys
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from pythonjsonlogger.json import JsonFormatter

from bot.escapes import escaped, terminal, traceback_text
from playbook.lessons import secrets as credentials

TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s [%(delivery)s] %(message)s"

# The delivery being handled by this request or worker thread; "-" outside one.
current_delivery: ContextVar[str] = ContextVar("current_delivery", default="-")


# Secrets the running process knows (webhook secrets, tokens, the database password), so any
# text leaving it (log lines, stored errors, replies) can be scrubbed of them.
_secrets: set[str] = set()
_secrets_lock = threading.Lock()
# Values shorter than this are not scrubbed: "a" would mangle every line.
MIN_SECRET_CHARS = 6
_AUTH_HEADER = re.compile(
    r"(?i)(authorization['\"]?\s*[:=]\s*['\"]?)(?:basic|bearer|token)\s+[^\s'\",}]{1,4096}"
)
_URL_CREDENTIALS = re.compile(r"([a-z][a-z0-9+.-]{0,30}://)[^/\s:@]{1,256}(?::[^/\s@]{0,256})?@")
# psycopg names the server and the role in connection errors.
_PG_SERVER = re.compile(r'(server at |host )"[^"]{0,256}"(?:, port \d{1,5})?')
_PG_ROLE = re.compile(r'((?:for )?(?:user|role) )"[^"]{0,256}"')
_REDACTED = "***"
# Set while this thread masks a text: a record the scanner logs meanwhile is not masked again
# (its lock is held, and waiting for it would never end).
_masking = threading.local()
# What is read of one message or traceback to mask it, and kept: the scanner's work grows with
# the text, and no line worth reading is longer.
MAX_MASKED_CHARS = 100_000


def add_secrets(values: Iterable[str | None]) -> None:
    """Remember secret values that :func:`redact` removes from any text."""
    with _secrets_lock:
        _secrets.update(v for v in values if v and len(v) >= MIN_SECRET_CHARS)


def redact(text: str) -> str:
    """``text`` without the known secrets, credentials, auth headers or database hosts."""
    # Known secrets first: masking a URL's password first would leave the rest of a known
    # secret that holds it (the model's base URL with a token in its query) unmatched.
    return masked(_scrubbed(text))


def _scrubbed(text: str) -> str:
    """``text`` without the known secrets, credentials in URLs, auth headers or database hosts."""
    with _secrets_lock:
        secrets = sorted(_secrets, key=len, reverse=True)
    for secret in secrets:
        if secret in text:
            text = text.replace(secret, _REDACTED)
    text = _AUTH_HEADER.sub(lambda m: f"{m.group(1)}{_REDACTED}", text)
    text = _URL_CREDENTIALS.sub(lambda m: f"{m.group(1)}{_REDACTED}@", text)
    text = _PG_SERVER.sub(lambda m: f'{m.group(1)}"{_REDACTED}"', text)
    return _PG_ROLE.sub(lambda m: f'{m.group(1)}"{_REDACTED}"', text)


def masked(text: str) -> str:
    """``text`` as written when it holds no credential, else as every exit shows it: visible,
    each credential masked (`playbook.lessons.secrets.masked`, one rule for every exit)."""
    if getattr(_masking, "on", False):
        return text
    _masking.on = True
    try:
        found = credentials.mask(text, MAX_MASKED_CHARS)
    finally:
        _masking.on = False
    if len(text) > MAX_MASKED_CHARS:
        return f"{found.text} [{len(text) - MAX_MASKED_CHARS:,} more characters not shown]"
    return found.text if found.findings else text


class RedactingFormatter(logging.Formatter):
    """Formats with another formatter, then scrubs secrets from the whole line (tracebacks too)."""

    def __init__(self, inner: logging.Formatter) -> None:
        super().__init__()
        self.inner = inner

    def format(self, record: logging.LogRecord) -> str:
        """The inner formatter's text, redacted: the message and traceback masked first (the
        rest of the line is the process's own)."""
        return _scrubbed(self.inner.format(self._masked(record)))

    def _masked(self, record: logging.LogRecord) -> logging.LogRecord:
        """``record``, or a copy with its message and traceback redacted: before the inner
        formatter writes them, since JSON would write an invisible character escaped
        (``\\u200b``), which no scan of the line could then read through."""
        message = record.getMessage()
        trace = self.inner.formatException(record.exc_info) if record.exc_info else record.exc_text
        shown, shown_trace = redact(message), redact(trace) if trace else trace
        if shown == message and shown_trace == trace:
            return record
        copy = logging.makeLogRecord(record.__dict__)
        copy.msg, copy.args, copy.exc_info, copy.exc_text = shown, None, None, shown_trace
        return copy


class OneLineFormatter(logging.Formatter):
    """The text format with every record on one line: the message and its fields (the
    delivery id is a header from outside) escaped, and a traceback's exception messages too.

    The traceback keeps its lines, which name our frames; only what an exception says may
    quote outside text, and that is escaped, so no line of a record can pass for a record.
    """

    def format(self, record: logging.LogRecord) -> str:
        """The record as the text format has it, with outside text escaped."""
        cached = record.exc_text
        # Another handler (a test's capture, say) may have cached the traceback unescaped; a
        # record without exc_info carries a traceback already written by this formatter (the
        # redacting copy), which must be kept.
        if record.exc_info:
            record.exc_text = None
        try:
            return super().format(record)
        finally:
            record.exc_text = cached

    def formatMessage(self, record: logging.LogRecord) -> str:
        """The record's line, masked, then every non-printable character of it escaped."""
        # Masked before escaping: a credential split by an invisible character is found in
        # the text as written; once escaped, the split would be visible text.
        return escaped(redact(super().formatMessage(record)))

    def formatException(self, ei: Any) -> str:
        """The traceback with each exception's message masked and escaped to one line."""
        return traceback_text(*ei, scrub=redact)

    def formatStack(self, stack_info: str) -> str:
        """The stack (our frames) with no raw control character."""
        return terminal(stack_info)


class DeliveryFilter(logging.Filter):
    """Stamps each record with the current delivery id, so one event can be followed end to end."""

    def filter(self, record: logging.LogRecord) -> bool:
        """Add ``record.delivery``; never drops a record."""
        record.delivery = current_delivery.get()
        return True


@contextmanager
def delivery_context(delivery_id: str) -> Iterator[None]:
    """Log everything inside the block under ``delivery_id``."""
    token = current_delivery.set(delivery_id)
    try:
        yield
    finally:
        current_delivery.reset(token)


def configure_logging(
    level: str = "INFO", fmt: str = "text", secrets: Iterable[str | None] = ()
) -> None:
    """Send log records to stderr as text or JSON, replacing earlier handlers.

    Every line is scrubbed of ``secrets`` and of credentials that error messages of the
    HTTP and database clients carry (the Jira client prints request headers, for one).
    """
    add_secrets(secrets)
    handler = logging.StreamHandler(sys.stderr)
    handler.addFilter(DeliveryFilter())
    inner: logging.Formatter
    if fmt == "json":
        inner = JsonFormatter(
            "%(asctime)s %(levelname)s %(name)s %(delivery)s %(message)s",
            rename_fields={"asctime": "time", "levelname": "level", "name": "logger"},
        )
    else:
        # JSON escapes every control and non-ASCII character by itself.
        inner = OneLineFormatter(TEXT_FORMAT)
    handler.setFormatter(RedactingFormatter(inner))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    # Alembic narrates every migration step at INFO; that is noise in a CLI's output.
    logging.getLogger("alembic").setLevel(max(root.level, logging.WARNING))
    # httpx (under the model client) logs every request at INFO: noise in `doctor`'s report
    # and the worker's log, which say what each model call came to.
    logging.getLogger("httpx").setLevel(max(root.level, logging.WARNING))

"""Checks for text that reaches the database: length caps and characters PostgreSQL refuses."""

from __future__ import annotations

from playbook.errors import InvalidInput

# Column sizes of the fields agents and people fill in (see playbook/models.py).
BULLET_ID_CHARS = 64
TICKET_KEY_CHARS = 200
PHASE_CHARS = 64
CONSUMER_CHARS = 200
QUERY_ID_CHARS = 64


def bounded(value: str, field: str, max_chars: int) -> str:
    """``value`` if it fits ``max_chars`` and holds no NUL or unpaired surrogate; else InvalidInput.

    PostgreSQL text cannot hold NUL, and an unpaired surrogate cannot be encoded at all:
    either would fail deep in a transaction instead of here, with the field named.
    """
    if len(value) > max_chars:
        raise InvalidInput(f"{field} is longer than {max_chars} characters")
    if "\x00" in value:
        raise InvalidInput(f"{field} contains a NUL character")
    if not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise InvalidInput(f"{field} contains an unpaired UTF-16 surrogate") from None
    return value


def printable(value: str) -> str:
    """``value`` with NUL characters dropped, for free text taken from webhook payloads."""
    return value.replace("\x00", "") if "\x00" in value else value

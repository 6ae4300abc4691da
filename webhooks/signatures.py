"""HMAC-SHA256 webhook signatures as GitHub and Jira send them, and constant-time compares."""

from __future__ import annotations

import hashlib
import hmac


def sign(secret: str, body: bytes) -> str:
    """The ``sha256=<hex>`` header value for ``body``."""
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def same(given: str, expected: str) -> bool:
    """Constant-time equality of a header value and a secret; False for non-ASCII values.

    hmac.compare_digest raises TypeError on non-ASCII str, and header values are whatever
    the sender put there; comparing UTF-8 bytes keeps it constant-time and total.
    """
    return hmac.compare_digest(
        given.encode("utf-8", "surrogateescape"), expected.encode("utf-8", "surrogateescape")
    )


def valid(secret: str, body: bytes, header: str | None) -> bool:
    """Whether ``header`` is the signature of ``body`` (constant-time compare)."""
    if not header or not header.startswith("sha256="):
        return False
    return same(header.strip(), sign(secret, body))

"""HMAC-SHA256 webhook signatures as GitHub and Jira send them."""

from __future__ import annotations

import hashlib
import hmac


def sign(secret: str, body: bytes) -> str:
    """The ``sha256=<hex>`` header value for ``body``."""
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def valid(secret: str, body: bytes, header: str | None) -> bool:
    """Whether ``header`` is the signature of ``body`` (constant-time compare)."""
    if not header or not header.startswith("sha256="):
        return False
    return hmac.compare_digest(sign(secret, body), header.strip())

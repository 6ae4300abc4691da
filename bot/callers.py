"""Who is calling the API or MCP: a caller from a verified bearer token, or the local user."""

from __future__ import annotations

import getpass
import hmac

from bot.config import Settings
from playbook.agents import Caller


def from_authorization(settings: Settings, header: str | None) -> Caller | None:
    """The caller an ``Authorization: Bearer`` header proves, or None.

    The maintainer token (PLAYBOOK_API_TOKEN) may do everything in every scope; an agent
    token (PLAYBOOK_AGENT_TOKENS) reads, searches, records usage and proposes, in its scope.
    Tokens are compared in constant time, and every one is compared, so timing tells
    nothing about which token nearly matched.
    """
    scheme, _, given = (header or "").partition(" ")
    given = given.strip()
    if scheme.lower() != "bearer" or not given or len(given) > 1_000:
        return None
    found: Caller | None = None
    if settings.api_token and same(given, settings.api_token):
        found = Caller(actor="api:maintainer", role="maintainer")
    for agent in settings.agents_by_token.values():
        matched = same(given, agent.token) | same(given, agent.entry)
        if matched and found is None:
            found = Caller(actor=f"agent:{agent.name}", role="agent", scope=agent.scope)
    return found


def same(given: str, expected: str) -> bool:
    """Constant-time equality of two tokens, total over any text a header may hold."""
    return hmac.compare_digest(
        given.encode("utf-8", "surrogateescape"), expected.encode("utf-8", "surrogateescape")
    )


def local(settings: Settings) -> Caller:
    """The local user of ``playbook-bot mcp`` over stdio: an agent in the configured scope."""
    actor = settings.actor or f"mcp:{_login()}"
    return Caller(actor=actor, role="agent", scope=settings.agent_scope)


def _login() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no passwd entry in some containers
        return "local"

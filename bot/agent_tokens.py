"""PLAYBOOK_AGENT_TOKENS read: each agent's name, token and the scope it works in."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass


@dataclass(frozen=True)
class AgentToken:
    """One entry of PLAYBOOK_AGENT_TOKENS: who the agent is and which scope it works in."""

    name: str
    token: str
    scope: str | None
    # The entry as written: accepted too, so a token that happens to contain a colon still
    # works when it is sent whole.
    entry: str = ""


# `name:token` or `name@scope:token`; a bare token has no such prefix. Names and scopes are
# what GitHub repositories and Jira projects are spelled with, so a token is never split
# inside itself unless it starts like one (documented: tokens hold no colons or commas).
_NAMED_TOKEN = re.compile(
    r"(?P<name>[A-Za-z0-9._-]{1,64})(?:@(?P<scope>[A-Za-z0-9._/-]{1,200}))?:(?P<token>.+)"
)


def agent_tokens(value: str, default_scope: str | None) -> dict[str, AgentToken]:
    """The agent tokens in ``value`` by token; unnamed ones are named by a digest prefix."""
    found: dict[str, AgentToken] = {}
    for raw in value.split(","):
        entry = raw.strip()
        if not entry:
            continue
        named = _NAMED_TOKEN.fullmatch(entry)
        if named:
            token = named["token"].strip()
            agent = AgentToken(named["name"], token, named["scope"] or default_scope, entry)
        else:
            digest = hashlib.sha256(entry.encode()).hexdigest()[:8]
            agent = AgentToken(f"agent-{digest}", entry, default_scope, entry)
        found[agent.token] = agent
    return found

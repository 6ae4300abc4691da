"""An agent scope no ticket can belong to is refused at start, naming the variable."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from bot.cli.base import invalid_settings
from bot.config import Settings
from playbook.scopes import scope_of

# Scopes a ticket key can belong to, each with such a key.
GOOD = {"acme/api": "acme/api#12", "CTMS": "CTMS-4410", "my.org/web-app": "my.org/web-app#1"}
# Scopes that would match nothing: the token would see only global lessons, silently.
BAD = ["MY-PROJ", "a/b/c", "/x", "x/", "a#b", "acme/api#1", "CTMS-1"]


@pytest.mark.parametrize("scope", sorted(GOOD))
def test_a_scope_a_ticket_can_have_is_accepted(scope: str) -> None:
    assert scope_of(GOOD[scope]) == scope  # the rule the views compare with
    assert Settings(PLAYBOOK_AGENT_SCOPE=scope).agent_scope == scope
    tokens = Settings(PLAYBOOK_AGENT_TOKENS=f"ci@{scope}:tok-123456").agents_by_token
    assert tokens["tok-123456"].scope == scope


# `name@scope:token` holds no `#` in its scope: such an entry is a bare token, of no scope.
REFUSED = [("PLAYBOOK_AGENT_SCOPE", scope) for scope in BAD] + [
    ("PLAYBOOK_AGENT_TOKENS", scope) for scope in BAD if "#" not in scope
]


@pytest.mark.parametrize(("variable", "scope"), REFUSED)
def test_a_scope_no_ticket_can_have_is_refused_naming_it(variable: str, scope: str) -> None:
    value = scope if variable == "PLAYBOOK_AGENT_SCOPE" else f"ci@{scope}:tok-123456"
    with pytest.raises(ValidationError) as refused:
        Settings(**{variable: value})
    # What the command prints: the variable and the scope, never the token.
    message = invalid_settings(refused.value)
    assert message == (
        f"invalid setting ({variable}: scope {scope!r} is neither owner/repo nor a Jira "
        "project key)"
    )


def test_tokens_of_no_scope_beside_scoped_ones_are_accepted() -> None:
    tokens = Settings(PLAYBOOK_AGENT_TOKENS="bare-token-1,ci@acme/api:tok-123456").agents_by_token
    assert {token: agent.scope for token, agent in tokens.items()} == {
        "bare-token-1": None,
        "tok-123456": "acme/api",
    }

"""The rule of which lessons a search searches, as each door's answer says it."""

from __future__ import annotations

import pytest

from playbook.errors import Forbidden
from playbook.scopes import EVERYTHING, View
from playbook.search.search_scope import searched_by

ACME = View(scope="acme/api")


@pytest.mark.parametrize(
    ("view", "asked", "scopes", "words"),
    [
        (EVERYTHING, {}, None, "every scope: neither a ticket nor a scope was named"),
        (
            EVERYTHING,
            {"ticket": "CTMS-6000", "found": "CTMS"},
            ["CTMS", "global"],
            "CTMS and global (the ticket's scope and global)",
        ),
        (
            EVERYTHING,
            {"ticket": "fix the login page"},
            ["global"],
            "global (the ticket's key names no scope, so global only)",
        ),
        (
            EVERYTHING,
            {"scope": "acme/api", "ticket": "CTMS-1", "found": "CTMS"},
            ["acme/api", "global"],
            "acme/api and global (the scope named and global)",
        ),
        (EVERYTHING, {"scope": "global"}, ["global"], "global (the scope named is global)"),
        (
            ACME,
            {},
            ["acme/api", "global"],
            "acme/api and global (this token's scope and global: a scoped token searches "
            "nothing else)",
        ),
        (ACME, {"scope": "acme/api"}, ["acme/api", "global"], None),
        (ACME, {"ticket": "acme/api#3", "found": "octo-org/shared"}, ["acme/api", "global"], None),
        (ACME, {"scope": "global"}, ["global"], None),
    ],
)
def test_the_rule(view: View, asked: dict, scopes: list[str] | None, words: str | None) -> None:
    answer = searched_by(view, **asked)
    assert answer.scopes == scopes
    if words is not None:
        assert answer.words() == words


def test_a_scoped_caller_naming_another_scope_is_refused_naming_the_field() -> None:
    with pytest.raises(Forbidden) as refused:
        searched_by(ACME, scope="CTMS")
    assert refused.value.field == "scope"
    assert "not this token's scope acme/api" in str(refused.value)

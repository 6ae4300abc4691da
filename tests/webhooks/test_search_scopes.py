"""One meaning for a search's scope on every door: the CLI, the API, MCP and the web page.

Naming a ticket searches its scope and global, as the bot's comment on it does; naming a
scope searches it and global; naming neither searches every scope the caller may read; a
scoped token never searches past its scope and global. Each answer says what it searched.
"""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest
from mcp import Client
from sqlalchemy import Engine

from bot.config import Settings
from bot.mcp_server import build_server, local_caller
from playbook import db
from playbook.lessons import lifecycle
from playbook.repos import stored
from webhooks.app import create_app

MAINTAINER = "search-scopes-maintainer"
SCOPED = "search-scopes-acme-api"
QUERY = "webhook retries idempotency"
TEXTS = {
    "global": "Retry webhooks with an idempotency key (global)",
    "CTMS": "Webhook retries in CTMS need the idempotency header",
    "acme/api": "acme/api webhook retries keep the idempotency key in Redis",
    "octo-org/shared": "Shared webhook retries log the idempotency key",
}


@pytest.fixture
def lessons(engine: Engine) -> dict[str, str]:
    """One matching lesson in each of four scopes: scope -> lesson id."""
    with db.transaction(engine) as session:
        ids = {
            scope: lifecycle.add(
                session, text, learned_from="T-1", actor="t", scope=scope
            ).bullet.id
            for scope, text in TEXTS.items()
        }
        # acme/web's settings file moved its tickets' lessons to octo-org/shared.
        stored.put(session, "acme/web", {"repo_values": {"scope": "octo-org/shared"}})
    return ids


@pytest.fixture
def api(settings: Settings, engine: Engine) -> Any:
    tokens = {"api_token": MAINTAINER, "agent_tokens": f"ci@acme/api:{SCOPED}"}
    return create_app(settings.model_copy(update=tokens), engine=engine).test_client()


def _scopes(found: list[dict[str, Any]]) -> set[str]:
    return {hit["scope"] for hit in found}


def _get(api: Any, token: str, **query: str) -> Any:
    return api.get(
        "/api/v1/search",
        query_string={"q": QUERY, "k": 10, **query},
        headers={"Authorization": f"Bearer {token}"},
    )


def _post(api: Any, token: str, **body: Any) -> Any:
    return api.post(
        "/api/v1/search",
        json={"query": QUERY, "k": 10, **body},
        headers={"Authorization": f"Bearer {token}"},
    )


@pytest.mark.usefixtures("lessons")
@pytest.mark.parametrize("door", [_get, _post], ids=["GET", "POST"])
def test_the_api_searches_a_tickets_scope_a_named_scope_or_every_scope(api: Any, door) -> None:
    ticket = door(api, MAINTAINER, ticket="CTMS-6000").get_json()
    assert _scopes(ticket["lessons"]) == {"CTMS", "global"}
    assert ticket["searched"] == {
        "scopes": ["CTMS", "global"],
        "why": "the ticket's scope and global",
    }

    # A repository's tickets use its settings' scope, as the bot's comment does.
    moved = door(api, MAINTAINER, ticket="acme/web#7").get_json()
    assert _scopes(moved["lessons"]) == {"octo-org/shared", "global"}
    assert moved["searched"]["scopes"] == ["octo-org/shared", "global"]

    named = door(api, MAINTAINER, scope="acme/api").get_json()
    assert _scopes(named["lessons"]) == {"acme/api", "global"}
    assert named["searched"]["why"] == "the scope named and global"

    # The scope named wins over the ticket's.
    both = door(api, MAINTAINER, scope="acme/api", ticket="CTMS-6000").get_json()
    assert _scopes(both["lessons"]) == {"acme/api", "global"}

    neither = door(api, MAINTAINER).get_json()
    assert _scopes(neither["lessons"]) == set(TEXTS)
    assert neither["searched"]["scopes"] is None
    assert "neither a ticket nor a scope" in neither["searched"]["why"]


@pytest.mark.usefixtures("lessons")
@pytest.mark.parametrize("door", [_get, _post], ids=["GET", "POST"])
def test_a_scoped_token_searches_its_scope_and_global_and_no_other(api: Any, door) -> None:
    mine = door(api, SCOPED).get_json()
    assert _scopes(mine["lessons"]) == {"acme/api", "global"}
    assert mine["searched"]["scopes"] == ["acme/api", "global"]
    assert "scoped token" in mine["searched"]["why"]

    only_global = door(api, SCOPED, scope="global").get_json()
    assert _scopes(only_global["lessons"]) == {"global"}

    refused = door(api, SCOPED, scope="CTMS")
    assert refused.status_code == 403
    problem = refused.get_json()
    assert problem["field"] == "scope" and "not this token's scope acme/api" in problem["detail"]
    assert TEXTS["CTMS"] not in refused.get_data(as_text=True)


def test_a_bad_scope_is_a_clear_400(api: Any) -> None:
    too_long = _get(api, MAINTAINER, scope="x" * 101)
    assert too_long.status_code == 400 and too_long.get_json()["field"] == "scope"
    spaced = _get(api, MAINTAINER, scope="two words")
    assert spaced.status_code == 400 and spaced.get_json()["field"] == "scope"
    blank = _post(api, MAINTAINER, scope="  ")
    assert blank.status_code == 400 and blank.get_json()["field"] == "scope"


def test_mcp_search_follows_the_same_rule_and_says_what_it_searched(
    settings: Settings, engine: Engine, lessons: dict[str, str]
) -> None:
    unscoped = build_server(settings, lambda: engine, local_caller(settings))
    scoped_settings = settings.model_copy(update={"agent_scope": "acme/api"})
    scoped = build_server(scoped_settings, lambda: engine, local_caller(scoped_settings))
    answers: dict[str, Any] = {}

    async def calls() -> None:
        async with Client(unscoped) as client:
            for name, arguments in {
                "ticket": {"ticket": "CTMS-6000"},
                "scope": {"scope": "octo-org/shared"},
                "neither": {},
            }.items():
                result = await client.call_tool("search_lessons", {"query": QUERY, **arguments})
                answers[name] = result.structured_content
        async with Client(scoped) as client:
            answers["scoped"] = (
                await client.call_tool("search_lessons", {"query": QUERY})
            ).structured_content
            refused = await client.call_tool("search_lessons", {"query": QUERY, "scope": "CTMS"})
            assert refused.is_error
            assert "not this token's scope acme/api" in refused.content[0].text

    anyio.run(calls)
    assert _scopes(answers["ticket"]["lessons"]) == {"CTMS", "global"}
    assert answers["ticket"]["searched"]["why"] == "the ticket's scope and global"
    assert _scopes(answers["scope"]["lessons"]) == {"octo-org/shared", "global"}
    assert _scopes(answers["neither"]["lessons"]) == set(TEXTS)
    assert answers["neither"]["searched"]["scopes"] is None
    assert _scopes(answers["scoped"]["lessons"]) == {"acme/api", "global"}


@pytest.mark.usefixtures("lessons")
def test_the_cli_searches_a_tickets_scope_and_says_what_it_searched(cli) -> None:
    def found(*args: str) -> dict[str, Any]:
        done = cli("search", QUERY, "-k", "10", "--json", *args)
        assert done.exit_code == 0, done.output
        return json.loads(done.stdout)

    ticket = found("--ticket", "CTMS-6000")
    assert _scopes(ticket["results"]) == {"CTMS", "global"}
    assert ticket["searched"] == {
        "scopes": ["CTMS", "global"],
        "why": "the ticket's scope and global",
    }
    assert _scopes(found("--scope", "acme/api")["results"]) == {"acme/api", "global"}
    assert _scopes(found("--ticket", "acme/web#2")["results"]) == {"octo-org/shared", "global"}
    everything = found()
    assert _scopes(everything["results"]) == set(TEXTS)
    assert everything["searched"]["scopes"] is None

    text = cli("search", QUERY, "--ticket", "CTMS-6000").stdout.splitlines()
    assert text[0] == "searched: CTMS and global (the ticket's scope and global)"
    plain = cli("search", QUERY).stdout.splitlines()
    assert plain[0] == "searched: every scope: neither a ticket nor a scope was named"


def test_the_cli_refuses_a_bad_ticket_or_scope_in_one_line(cli) -> None:
    for args in (("--ticket", "CTMS-1\x00"), ("--scope", "x" * 201), ("--ticket", "A-1" * 100)):
        done = cli("search", QUERY, *args)
        assert done.exit_code != 0, args
        assert "Traceback" not in done.output
        assert len(done.stderr.strip().splitlines()) == 1, done.stderr
        assert args[0] in done.stderr

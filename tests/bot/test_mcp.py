"""The MCP server driven by the SDK's own client, over stdio (`playbook-bot mcp`) and HTTP."""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from click.testing import CliRunner
from flask import Flask
from mcp import Client, MCPError, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from sqlalchemy import Engine

from bot.config import Settings
from bot.mcp_server import bearer_caller, build_server, local_caller
from playbook import db
from playbook.lessons import lifecycle
from playbook.models import Bullet, UsageEvent
from tests.support import saw, serving
from webhooks import mcp_http
from webhooks.app import create_app

TOOLS = {"search_lessons", "get_lesson", "record_usage", "propose_lesson", "list_proposals"}
MAINTAINER = "maintainer-secret-1"
AGENT = "agent-secret-1"
SCOPED = "scoped-secret-1"
# Catches a hang, not a slow machine: a whole session takes seconds even on a loaded one.
GUARD_SECONDS = 300


def run(session: Callable[[], Awaitable[None]]) -> None:
    """Run an async test body, failing (not hanging) if it never ends."""

    async def guarded() -> None:
        with anyio.fail_after(GUARD_SECONDS):
            await session()

    anyio.run(guarded)


@pytest.fixture
def two_scopes(engine: Engine) -> dict[str, str]:
    """A global lesson, and one of another repository's scope."""
    with db.transaction(engine) as session:
        stripe = lifecycle.add(
            session,
            "Retry Stripe webhooks with the event id as the idempotency key",
            learned_from="CTMS-1",
            actor="t",
        ).bullet.id
        other = lifecycle.add(
            session,
            "Rotate the Kafka consumer group when the topic schema changes",
            learned_from="OTHER-7",
            actor="t",
            scope="other/repo",
        ).bullet.id
    return {"stripe": stripe, "other": other}


def counters(engine: Engine, bullet_id: str) -> tuple[int, int]:
    """(loads, cites) of a lesson, read from the database."""
    with db.transaction(engine) as session:
        bullet = session.get(Bullet, bullet_id)
        assert bullet is not None
        return bullet.loads, bullet.cites


def consumers(engine: Engine, bullet_id: str, kind: str) -> list[str | None]:
    """Who each ``kind`` event of a lesson was recorded for."""
    with db.transaction(engine) as session:
        events = session.query(UsageEvent).filter_by(bullet_id=bullet_id, kind=kind)
        return [event.consumer for event in events]


def error_text(result: Any) -> str:
    """The text of a tool's error result."""
    assert result.is_error, result
    return " ".join(block.text for block in result.content)


async def check_tools_and_errors(client: Client, two_scopes: dict[str, str]) -> None:
    """What both transports must do alike: the four tools, and mistakes as readable errors."""
    listed = {tool.name: tool for tool in (await client.list_tools()).tools}
    assert set(listed) == TOOLS
    for tool in listed.values():
        assert tool.output_schema is not None
        # Who calls comes from the transport, never from an argument. A search may name a
        # scope to narrow what it searches, never to widen the caller's (refused below).
        named = set(tool.input_schema["properties"]) - (
            {"scope"} if tool.name == "search_lessons" else set()
        )
        assert not {"scope", "actor", "consumer", "role"} & named
    assert listed["search_lessons"].input_schema["properties"]["k"]["minimum"] == 1

    missing = await client.call_tool("get_lesson", {"id": "pb-999"})
    assert "no bullet with id 'pb-999'" in error_text(missing)
    assert "invalid arguments" in error_text(
        await client.call_tool("search_lessons", {"query": "stripe", "k": 0})
    )
    assert "invalid arguments" in error_text(
        await client.call_tool("search_lessons", {"query": "stripe", "k": "many"})
    )
    assert "less than or equal to 100" in error_text(
        await client.call_tool("search_lessons", {"query": "stripe", "k": 101})
    )
    bogus = await client.call_tool(
        "record_usage", {"ticket": "CTMS-9", "lesson_ids": [two_scopes["stripe"]], "kind": "bogus"}
    )
    assert "kind" in error_text(bogus)
    assert "query" in error_text(await client.call_tool("search_lessons", {"query": "   "}))
    assert "lesson_ids" in error_text(
        await client.call_tool(
            "record_usage", {"ticket": "CTMS-9", "lesson_ids": [], "kind": "cited"}
        )
    )
    # Every error left the session working.
    found = await client.call_tool("search_lessons", {"query": "stripe webhook retries"})
    assert not found.is_error
    assert [hit["id"] for hit in found.structured_content["lessons"]] == [two_scopes["stripe"]]
    # Each lesson carries its estimated fit, in a number and in words, and the words matched.
    [hit] = found.structured_content["lessons"]
    assert 0 < hit["relevance"] < 1 and hit["fit"] in ("strong", "possible", "weak")
    assert {"Stripe", "stripe"} & set(hit["matched"]) or "webhook" in hit["matched"]
    above = {"query": "stripe webhook retries", "min_relevance": min(hit["relevance"] + 0.01, 1)}
    assert (await client.call_tool("search_lessons", above)).structured_content["lessons"] == []
    assert "less than or equal to 1" in error_text(
        await client.call_tool("search_lessons", {"query": "stripe", "min_relevance": 2})
    )


async def check_prompt_and_resources(client: Client, two_scopes: dict[str, str]) -> None:
    """The lesson resource, the guide and the prompt."""
    templates = (await client.list_resource_templates()).resource_templates
    assert [t.uri_template for t in templates] == ["playbook://lessons/{id}"]
    read = await client.read_resource(f"playbook://lessons/{two_scopes['stripe']}")
    (content,) = read.contents
    assert content.mime_type == "application/json"
    assert f'"id":"{two_scopes["stripe"]}"' in content.text
    with pytest.raises(MCPError, match="no bullet with id 'pb-999'"):
        await client.read_resource("playbook://lessons/pb-999")
    guide = await client.read_resource("playbook://guide")
    assert "search_lessons" in guide.contents[0].text

    prompts = (await client.list_prompts()).prompts
    assert [p.name for p in prompts] == ["use_playbook"]
    prompt = await client.get_prompt("use_playbook", {"task": "CTMS-9 Stripe refunds fail"})
    text = prompt.messages[0].content.text
    assert "CTMS-9 Stripe refunds fail" in text
    for step in ("search_lessons", "record_usage", 'kind="cited"', "propose_lesson", "pb-12"):
        assert step in text
    assert "search_lessons" in (await client.get_prompt("use_playbook")).messages[0].content.text


# -- stdio -------------------------------------------------------------------------------------


@pytest.fixture
def stdio(database_url: str, tmp_path: Path) -> Iterator[Callable[..., Client]]:
    """Clients that start `python -m bot mcp` on the test database; its stderr kept in a file."""
    log = (tmp_path / "mcp-stderr.log").open("w+")
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "bot", "mcp"],
        env={"PLAYBOOK_DATABASE_URL": database_url, "PLAYBOOK_ACTOR": "mcp:tester"},
        # Away from the checkout, whose .env or playbook.db must not reach the server.
        cwd=tmp_path,
    )
    yield lambda mode="auto": Client(stdio_client(params, errlog=log), mode=mode)
    log.close()


async def check_search_cite_and_propose(client: Client, engine: Engine, stripe: str) -> None:
    """A search for a ticket counts a load, a cite counts once for the caller, a proposal is
    stored as proposed (or named a duplicate of the lesson it repeats)."""
    found = await client.call_tool(
        "search_lessons", {"query": "Stripe webhook retries", "ticket": "CTMS-9"}
    )
    assert not found.is_error
    answer = found.structured_content
    assert answer["ticket"] == "CTMS-9"
    assert answer["loads_recorded"] == 1
    assert [hit["id"] for hit in answer["lessons"]] == [stripe]
    assert counters(engine, stripe) == (1, 0)

    cite = {"ticket": "CTMS-9", "lesson_ids": [stripe], "kind": "cited"}
    cited = await client.call_tool("record_usage", cite)
    assert cited.structured_content == {
        "ticket": "CTMS-9",
        "kind": "cited",
        "lesson_ids": [stripe],
        "recorded": 1,
        "counted": 1,
        "discounted": {},
    }
    assert counters(engine, stripe) == (1, 1)
    again = await client.call_tool("record_usage", cite)
    assert again.structured_content["recorded"] == 0
    assert counters(engine, stripe) == (1, 1)
    assert consumers(engine, stripe, "cited") == ["mcp:tester"]

    proposed = await client.call_tool(
        "propose_lesson",
        {
            "text": "Pin the Stripe API version header on every request",
            "learned_from": "CTMS-9",
            "tags": ["payments"],
        },
    )
    new = proposed.structured_content
    assert new["created"] is True
    assert new["duplicate_of"] is None
    assert new["lesson"]["status"] == "proposed"
    assert new["lesson"]["scope"] == "global"
    assert new["lesson"]["tags"] == ["payments"]
    with db.transaction(engine) as check:
        assert check.get(Bullet, new["lesson"]["id"]).status == "proposed"

    duplicate = await client.call_tool(
        "propose_lesson",
        {
            "text": "Retry Stripe webhooks with the event id as idempotency key",
            "learned_from": "CTMS-9",
        },
    )
    assert duplicate.structured_content["created"] is False
    assert duplicate.structured_content["duplicate_of"] == stripe

    detail = await client.call_tool("get_lesson", {"id": stripe})
    assert detail.structured_content["cites"] == 1
    assert detail.structured_content["status"] == "active"


# One session per protocol revision does all a stdio client does: each starts `playbook-bot
# mcp`, a second or more of start-up.
@pytest.mark.slow
@pytest.mark.parametrize("mode", ["auto", "legacy"])
def test_stdio_session(stdio, two_scopes, engine: Engine, tmp_path: Path, mode: str) -> None:
    saw(engine, "CTMS-9")

    async def session() -> None:
        async with stdio(mode) as client:
            assert (client.protocol_version in HANDSHAKE_PROTOCOL_VERSIONS) == (mode == "legacy")
            assert client.server_info is not None
            assert client.server_info.name == "playbook"
            await check_search_cite_and_propose(client, engine, two_scopes["stripe"])
            await check_tools_and_errors(client, two_scopes)
            await check_prompt_and_resources(client, two_scopes)

    run(session)
    # The protocol ran on stdout (the calls above worked); the server's log is on stderr.
    assert "get_lesson" in (tmp_path / "mcp-stderr.log").read_text()


def test_mcp_command_fails_in_one_line_when_the_database_cannot_open(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from bot.cli import main

    monkeypatch.chdir(tmp_path)
    missing = tmp_path / "no-such-directory" / "playbook.db"
    result = CliRunner().invoke(
        main, ["mcp"], env={"PLAYBOOK_DATABASE_URL": f"sqlite:///{missing}"}
    )
    assert result.exit_code == 2
    # Before any client connects, and with stdout left to the protocol.
    assert result.stdout == ""
    assert "cannot use the database" in result.stderr


# -- in-process ---------------------------------------------------------------------------------


def test_database_down_is_a_one_line_tool_error(tmp_path: Path) -> None:
    settings = Settings(_env_file=None)
    missing = tmp_path / "no-such-directory" / "playbook.db"
    engine = db.make_engine(f"sqlite:///{missing}")
    server = build_server(settings, lambda: engine, local_caller(settings))

    async def session() -> None:
        async with Client(server) as client:
            result = await client.call_tool("search_lessons", {"query": "stripe"})
            message = error_text(result)
            assert "database is unavailable" in message
            assert "no-such-directory" not in message
            assert "\n" not in message

    try:
        run(session)
    finally:
        engine.dispose()


def test_http_caller_without_a_token_is_refused_by_the_tools(engine: Engine, two_scopes) -> None:
    # Behind a transport that forgot the token check, the tools still act for nobody.
    settings = Settings(PLAYBOOK_AGENT_TOKENS=AGENT, _env_file=None)
    server = build_server(settings, lambda: engine, bearer_caller(settings))

    async def session() -> None:
        async with Client(server) as client:
            result = await client.call_tool("get_lesson", {"id": two_scopes["stripe"]})
            assert "not authenticated" in error_text(result)

    run(session)


# -- HTTP ---------------------------------------------------------------------------------------


def http_app(settings: Settings, engine: Engine) -> Flask:
    """The real app, which serves MCP at /mcp."""
    app = create_app(settings, engine=engine)
    assert mcp_http.blueprint.name in app.blueprints
    return app


@pytest.fixture
def http_settings(database_url: str) -> Settings:
    """A maintainer token, an agent without a scope, and one working in acme/api."""
    return Settings(
        PLAYBOOK_DATABASE_URL=database_url,
        PLAYBOOK_API_TOKEN=MAINTAINER,
        PLAYBOOK_AGENT_TOKENS=f"claude:{AGENT},scoped@acme/api:{SCOPED}",
        _env_file=None,
    )


@pytest.fixture
def served(http_settings: Settings, engine: Engine) -> Iterator[str]:
    """The app served by werkzeug on a free local port; yields the MCP endpoint's URL."""
    with serving(http_app(http_settings, engine)) as url:
        yield f"{url}/mcp"


async def connect(
    url: str, token: str, body: Callable[[Client], Awaitable[None]], mode: str = "auto"
) -> None:
    """Run ``body`` with a client that sends ``token`` as its bearer token."""
    async with (
        create_mcp_http_client(headers={"Authorization": f"Bearer {token}"}) as http,
        Client(streamable_http_client(url, http_client=http), mode=mode) as client,
    ):
        await body(client)


def test_http_tools_errors_prompt_and_resources(served: str, two_scopes) -> None:
    async def body(client: Client) -> None:
        await check_tools_and_errors(client, two_scopes)
        await check_prompt_and_resources(client, two_scopes)

    run(lambda: connect(served, AGENT, body))


def test_http_agent_token_cites_as_the_agent(served: str, two_scopes, engine: Engine) -> None:
    stripe = two_scopes["stripe"]
    saw(engine, "CTMS-9")

    async def body(client: Client) -> None:
        found = await client.call_tool(
            "search_lessons", {"query": "Stripe webhook retries", "ticket": "CTMS-9", "k": 100}
        )
        assert [hit["id"] for hit in found.structured_content["lessons"]] == [stripe]
        cite = {"ticket": "CTMS-9", "lesson_ids": [stripe], "kind": "cited"}
        assert (await client.call_tool("record_usage", cite)).structured_content["recorded"] == 1
        assert (await client.call_tool("record_usage", cite)).structured_content["recorded"] == 0
        detail = (await client.call_tool("get_lesson", {"id": stripe})).structured_content
        assert [e["consumer"] for e in detail["events"] if e["kind"] == "cited"] == ["agent:claude"]

        proposed = await client.call_tool(
            "propose_lesson",
            {
                "text": "Pin the Stripe API version header on every request",
                "learned_from": "CTMS-9",
            },
        )
        lesson = proposed.structured_content["lesson"]
        assert (lesson["status"], lesson["scope"]) == ("proposed", "global")

    run(lambda: connect(served, AGENT, body))
    assert counters(engine, stripe) == (1, 1)
    assert consumers(engine, stripe, "cited") == ["agent:claude"]


def test_http_maintainer_token_works(served: str, two_scopes) -> None:
    async def body(client: Client) -> None:
        # The maintainer sees every scope and the proposals, and has no tool to approve.
        assert {t.name for t in (await client.list_tools()).tools} == TOOLS
        assert not (await client.call_tool("list_proposals", {})).is_error
        other = await client.call_tool("get_lesson", {"id": two_scopes["other"]})
        assert other.structured_content["scope"] == "other/repo"
        cite = {"ticket": "OTHER-8", "lesson_ids": [two_scopes["other"]], "kind": "cited"}
        assert (await client.call_tool("record_usage", cite)).structured_content["recorded"] == 1

    run(lambda: connect(served, MAINTAINER, body))


# Clients of the 2025 protocol revisions (initialize handshake) and of the current one.
@pytest.mark.parametrize("mode", ["auto", "legacy"])
def test_http_scoped_agent_stays_in_its_scope(
    served: str, two_scopes, engine: Engine, mode: str
) -> None:
    other = two_scopes["other"]

    async def body(client: Client) -> None:
        assert (client.protocol_version in HANDSHAKE_PROTOCOL_VERSIONS) == (mode == "legacy")
        hidden = await client.call_tool("get_lesson", {"id": other})
        assert f"no bullet with id '{other}'" in error_text(hidden)
        with pytest.raises(MCPError, match="no bullet"):
            await client.read_resource(f"playbook://lessons/{other}")
        cite = {"ticket": "acme/api#1", "lesson_ids": [other], "kind": "cited"}
        assert "no bullet" in error_text(await client.call_tool("record_usage", cite))
        found = await client.call_tool("search_lessons", {"query": "Kafka consumer group schema"})
        assert found.structured_content["lessons"] == []
        # The global lesson is in every scope.
        shared = await client.call_tool("get_lesson", {"id": two_scopes["stripe"]})
        assert not shared.is_error

        # A scope in the arguments is not an argument of the tool: the token's scope wins.
        proposed = await client.call_tool(
            "propose_lesson",
            {
                "text": "Version every public API route under /v1 from the start",
                "learned_from": "acme/api#1",
                "scope": "other/repo",
            },
        )
        assert proposed.structured_content["lesson"]["scope"] == "acme/api"
        assert proposed.structured_content["lesson"]["learned_from"] == "acme/api#1"

    run(lambda: connect(served, SCOPED, body, mode))
    assert counters(engine, other) == (0, 0)


def test_http_refuses_requests_without_a_valid_token(http_settings: Settings, engine) -> None:
    client = http_app(http_settings, engine).test_client()
    initialize = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
    for headers in ({}, {"Authorization": "Bearer wrong-token"}, {"Authorization": AGENT}):
        response = client.post("/mcp", json=initialize, headers=headers)
        assert response.status_code == 401
        assert response.headers["WWW-Authenticate"].startswith("Bearer")
        assert "Authorization: Bearer" in response.get_json()["message"]
    # A valid token, but no stream to open and no session to end on a stateless server.
    for method in ("GET", "DELETE"):
        response = client.open("/mcp", method=method, headers={"Authorization": f"Bearer {AGENT}"})
        assert response.status_code == 405
        assert response.headers["Allow"] == "POST"


def test_http_is_off_without_any_token(engine: Engine, database_url: str) -> None:
    settings = Settings(PLAYBOOK_DATABASE_URL=database_url, _env_file=None)
    response = http_app(settings, engine).test_client().post("/mcp", json={})
    assert response.status_code == 503
    assert "PLAYBOOK_AGENT_TOKENS" in response.get_json()["message"]


def test_search_for_a_held_out_ticket_answers_empty(
    database_url: str, two_scopes, engine: Engine
) -> None:
    from playbook.experiment import assignment

    salt = "mcp-holdout-salt"
    held = next(
        f"CTMS-{n}"
        for n in range(1, 1000)
        if assignment.arm(salt.encode(), f"CTMS-{n}", 50) == "held_out"
    )
    # In-process: what the server is started with reaches it through the same Settings as in
    # the stdio session above.
    settings = Settings(
        PLAYBOOK_DATABASE_URL=database_url,
        PLAYBOOK_ACTOR="mcp:tester",
        PLAYBOOK_HOLDOUT_PERCENT=50,
        PLAYBOOK_EXPERIMENT_SALT=salt,
        _env_file=None,
    )
    server = build_server(settings, lambda: engine, local_caller(settings))

    async def session() -> None:
        async with Client(server) as client:
            found = await client.call_tool(
                "search_lessons", {"query": "Stripe webhook retries", "ticket": held}
            )
            answer = found.structured_content
            assert answer["held_out"] is True and answer["lessons"] == []
            assert "held-out arm" in answer["reason"]
            # Without a ticket the same search is outside the experiment.
            free = await client.call_tool("search_lessons", {"query": "Stripe webhook retries"})
            assert free.structured_content["held_out"] is False
            assert [hit["id"] for hit in free.structured_content["lessons"]] == [
                two_scopes["stripe"]
            ]

    run(session)
    assert counters(engine, two_scopes["stripe"]) == (0, 0)

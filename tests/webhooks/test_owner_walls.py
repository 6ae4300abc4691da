"""Every door an agent token reaches, walked by an owner against another owner's lessons.

A GitHub App serves many owners, and Jira projects besides: a token scoped to ``evil/app``
must never read, nor change, anything of ``victim/secret`` (another owner), of the Jira
project ``CTMS``, or of ``evil/app-internal`` (a repository whose name starts like its own,
which a prefix match would take for its Jira-style tickets).

The walk is generated, not listed: every operation of the OpenAPI document, every other
route of the app, every MCP tool (from its input schema), resource template and prompt, over
HTTP with the token and through ``playbook-bot mcp`` (the one command bound to a scope,
PLAYBOOK_AGENT_SCOPE). Each is called with its plain arguments, then with each string
argument replaced by each of the victims' scope names, ticket keys and lesson ids, and each
path parameter by each of their ids. A route or tool added later is walked the same way.

Every answer is checked: no 5xx; none of the victims' ids, ticket keys, scope names or words
(texts, reasons, gap words, their agent) unless the request itself named it; a request naming
a victim's id or ticket answers exactly as one naming an id or ticket that does not exist;
a write naming any of them in a field that is not free text is refused. After every call the
database is checked: no row about a victim (by id, ticket, scope) has appeared, changed or
gone.
"""

from __future__ import annotations

import inspect
import json
import re
import sys
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote

import anyio
import click
import pytest
from mcp import Client, MCPError, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from sqlalchemy import Engine

from bot.cli import main
from bot.config import Settings
from tests.support import serving
from tests.webhooks.owner_walls_probes import (
    Probe,
    Request,
    Walk,
    api_operations,
    api_requests,
    probes,
    renamed,
    swap,
)
from tests.webhooks.owner_walls_world import (
    ATTACKER,
    MAINTAINER,
    MISSING_ID,
    NOT_PLAIN_ROUTES,
    OWN_TICKET,
    RECORDING_READS,
    SALT,
    TOKEN,
    World,
    build,
    ticket,
    victim_rows,
)
from webhooks.app import create_app


def test_every_route_keeps_an_owner_out_of_another_owners_lessons(
    engine: Engine, database_url: str
) -> None:
    world = build(engine)
    app = create_app(walk_settings(database_url), engine=engine)
    client = app.test_client()
    headers = {"Authorization": f"Bearer {TOKEN}"}
    document = client.get("/api/v1/openapi.json").get_json()
    components = document.get("components", {}).get("schemas", {})
    walk = Walk(engine, world, victim_rows(engine, world))
    assert walk.before, "the world has rows of the victims"

    def send(request: Request) -> Any:
        return client.open(request.url(), method=request.method, json=request.body, headers=headers)

    for method, path, operation in api_operations(document):
        for request in api_requests(method, path, operation, components, world):
            answer = send(request)
            what = f"{method} {request.url()} {request.body}"
            assert answer.status_code < 500, (what, answer.text)
            sent = json.dumps([request.in_path, request.query, request.body])
            writes = method != "GET" or (method, path) in RECORDING_READS
            refused = answer.status_code >= 400
            walk.check(what, answer.text, sent, request.probe, refused, writes)
            value = request.probe.value
            other = world.missing(value) if value else None
            if value is None or other is None or not request.probe.names_victim_key:
                continue  # free text: the caller's own words, answered by its own state
            # Another scope's id or ticket answers as one that does not exist.
            twin = send(request.twin(value, other))
            assert twin.status_code == answer.status_code, (what, answer.text, twin.text)
            if answer.status_code >= 400:
                assert renamed(answer.text, value, other) == twin.text, (what, answer.text)
    # Every other route of the app, with the agent's token: refused or harmless, never a leak.
    documented = {re.sub(r"\{(\w+)\}", r"<\1>", path) for _, path, _ in api_operations(document)}
    for rule in app.url_map.iter_rules():
        if rule.rule in documented or rule.rule in NOT_PLAIN_ROUTES:
            continue
        for value in [*world.victim_ids[:2], str(world.consolidations[0])]:
            concrete = re.sub(r"<(?:\w+:)?\w+>", quote(value, safe=""), rule.rule)
            for method in sorted((rule.methods or set()) & {"GET", "POST"}):
                answer = client.open(concrete, method=method, headers=headers, json={})
                # 503 is /readyz's word for "no worker", not a failure.
                assert answer.status_code != 500, (method, concrete, answer.text)
                text = answer.get_data(as_text=True)
                walk.check(f"{method} {concrete}", text, concrete, Probe({}), True, False)
    assert walk.own_answers, "the walk reached the attacker's own lessons, not only refusals"
    # The token's own view still works: its gap, its lesson, the global lesson's own usage.
    own = client.get("/api/v1/gaps?min=2", headers=headers).get_json()
    assert [t["key"] for gap in own["gaps"] for t in gap["tickets"]] == [
        ticket(ATTACKER, n) for n in (5, 6, 7)
    ]
    shared = client.get(f"/api/v1/lessons/{world.shared}", headers=headers).get_json()
    assert {e["ticket"] for e in shared["events"]} <= {"evil/app#2", OWN_TICKET}
    stats = client.get("/api/v1/stats", headers=headers).get_json()
    assert stats["ratings"]["count"] == 0
    # The maintainer still sees the victims' work.
    everything = client.get(
        "/api/v1/gaps?min=2", headers={"Authorization": f"Bearer {MAINTAINER}"}
    ).get_json()
    assert len(everything["gaps"]) >= 1 and "zugzwang" in json.dumps(everything).lower()


def walk_settings(database_url: str, **changes: Any) -> Settings:
    """The app's settings: the attacker's scoped token, the holdout on, no write limit."""
    return Settings(
        PLAYBOOK_DATABASE_URL=database_url,
        PLAYBOOK_API_TOKEN=MAINTAINER,
        PLAYBOOK_AGENT_TOKENS=f"evil@{ATTACKER}:{TOKEN}",
        PLAYBOOK_HOLDOUT_PERCENT=50,
        PLAYBOOK_EXPERIMENT_SALT=SALT,
        PLAYBOOK_AGENT_WRITES_PER_MINUTE=0,
        GITHUB_WEBHOOK_SECRET="walk-github-secret",
        JIRA_WEBHOOK_SECRET="walk-jira-secret",
        _env_file=None,
        **changes,
    )


# -- MCP ------------------------------------------------------------------------------------------


async def walk_mcp(client: Client, walk: Walk) -> None:
    """Every tool (arguments from its input schema), resource template and prompt."""
    world = walk.world

    async def tool(name: str, arguments: dict[str, Any]) -> tuple[str, bool]:
        result = await client.call_tool(name, arguments)
        return result.model_dump_json(), bool(result.is_error)

    tools = (await client.list_tools()).tools
    assert tools, "the server lists its tools"
    for listed in tools:
        schema = listed.input_schema
        components = schema.get("$defs", {})
        for probe in probes(
            schema.get("properties", {}), schema.get("required", []), components, world
        ):
            answer, failed = await tool(listed.name, probe.arguments)
            what = f"tool {listed.name} {probe.arguments}"
            reads = listed.annotations is not None and listed.annotations.read_only_hint
            walk.check(what, answer, json.dumps(probe.arguments), probe, failed, not reads)
            other = world.missing(probe.value) if probe.value else None
            if probe.value is None or other is None or not probe.names_victim_key:
                continue
            twin, twin_failed = await tool(listed.name, swap(probe.arguments, probe.value, other))
            assert twin_failed == failed, (what, answer, twin)
            if failed:
                assert renamed(answer, probe.value, other) == twin, (what, answer, twin)

    async def read(uri: str) -> str:
        try:
            return (await client.read_resource(uri)).model_dump_json()
        except MCPError as error:
            return f"error: {error}"

    uris = [str(resource.uri) for resource in (await client.list_resources()).resources]
    for template in (await client.list_resource_templates()).resource_templates:
        for value in [*world.victim_ids, *world.values(), world.own]:
            uris.append(re.sub(r"\{\w+\}", quote(value, safe=""), template.uri_template))
    for uri in uris:
        answer = await read(uri)
        walk.check(f"resource {uri}", answer, unquote(uri), Probe({}), True, False)
        for value in world.victim_ids:
            if quote(value, safe="") in uri:
                twin = await read(uri.replace(value, MISSING_ID))
                assert renamed(answer, value, MISSING_ID) == twin, (uri, answer, twin)
    for prompt in (await client.list_prompts()).prompts:
        names = [argument.name for argument in prompt.arguments or []]
        for value in ["", *world.values()]:
            arguments = dict.fromkeys(names, value) if value else {}
            answer = (await client.get_prompt(prompt.name, arguments)).model_dump_json()
            walk.check(
                f"prompt {prompt.name}", answer, json.dumps(arguments), Probe({}), True, False
            )


def run(body: Callable[[], Awaitable[None]]) -> None:
    """``body`` under a hang guard."""

    async def guarded() -> None:
        with anyio.fail_after(300):
            await body()

    anyio.run(guarded)


@pytest.fixture
def world_and_url(engine: Engine, database_url: str) -> Iterator[tuple[World, str]]:
    """The world, and the app serving it (MCP at /mcp)."""
    world = build(engine)
    with serving(create_app(walk_settings(database_url), engine=engine)) as url:
        yield world, f"{url}/mcp"


@pytest.mark.slow  # a server on a port, as agents reach it
def test_every_mcp_tool_over_http_keeps_an_owner_out(
    engine: Engine, world_and_url: tuple[World, str]
) -> None:
    world, url = world_and_url
    walk = Walk(engine, world, victim_rows(engine, world))

    async def body() -> None:
        async with (
            create_mcp_http_client(headers={"Authorization": f"Bearer {TOKEN}"}) as http,
            Client(streamable_http_client(url, http_client=http)) as client,
        ):
            await walk_mcp(client, walk)

    run(body)
    assert walk.own_answers


@pytest.mark.slow  # a process: the command as an agent's host starts it
def test_playbook_bot_mcp_in_a_scope_keeps_its_user_out(
    engine: Engine, database_url: str, tmp_path: Path
) -> None:
    """The CLI's one scoped command, as an agent's host starts it."""
    world = build(engine)
    walk = Walk(engine, world, victim_rows(engine, world))
    log = (tmp_path / "mcp-stderr.log").open("w+")
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "bot", "mcp"],
        env={
            "PLAYBOOK_DATABASE_URL": database_url,
            "PLAYBOOK_AGENT_SCOPE": ATTACKER,
            "PLAYBOOK_ACTOR": "mcp:evil",
            "PLAYBOOK_HOLDOUT_PERCENT": "50",
            "PLAYBOOK_EXPERIMENT_SALT": SALT,
            "PLAYBOOK_AGENT_WRITES_PER_MINUTE": "0",
        },
        cwd=tmp_path,
    )

    async def body() -> None:
        async with Client(stdio_client(params, errlog=log)) as client:
            await walk_mcp(client, walk)

    try:
        run(body)
    finally:
        log.close()
    assert walk.own_answers


# What makes a command act for a scoped caller rather than as the operator, who has the
# database itself: the local agent caller, the agent scope setting, an agent's role.
SCOPED_CALLER = ("local_caller", "callers.local", "agent_scope", 'role="agent"')


def test_the_one_scoped_command_is_the_one_walked() -> None:
    """Every other `playbook-bot` command is the operator's; a new scoped one must be walked."""
    context = click.Context(main)
    scoped: set[str] = set()

    def visit(command: click.Command, name: str) -> None:
        if isinstance(command, click.Group):
            for sub in command.list_commands(context):
                found = command.get_command(context, sub)
                assert found is not None, sub
                visit(found, f"{name} {sub}".strip())
            return
        module = inspect.getmodule(command.callback)
        assert module is not None, name
        if any(marker in inspect.getsource(module) for marker in SCOPED_CALLER):
            scoped.add(name)

    visit(main, "")
    # test_playbook_bot_mcp_in_a_scope_keeps_its_user_out walks it.
    assert scoped == {"mcp"}

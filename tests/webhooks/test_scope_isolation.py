"""A scoped agent reads nothing of another scope, through any route or MCP entry it can reach.

Every API operation of the OpenAPI document and every MCP tool, resource and prompt is
called with a token bound to acme/api, asking for another scope's lessons by id, text,
ticket and filter; no answer may carry that scope's ids, texts, reasons or ticket keys.
A route or MCP entry added later without a call here fails the walk.
"""

from __future__ import annotations

import json
import re
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import anyio
import pytest
from mcp import Client, MCPError
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from sqlalchemy import Engine

from bot.config import Settings
from bot.mcp_server import build_server, local_caller
from playbook import agents, db, stats_answer
from playbook.fit import labels
from playbook.lessons import lifecycle
from playbook.models import Bullet
from playbook.outcomes import usage
from tests.support import serving
from webhooks.app import create_app

MAINTAINER = "isolation-maintainer"
SCOPED = "isolation-scoped"
MINE = "acme/api"
THEIRS = "other/repo"
# Words that appear only in the other scope's rows: texts, reasons, ticket keys, consumers.
SECRETS = (
    "Zanzibar",
    "Quokka",
    "Marmalade",
    "OTHER-7",
    "OTHER-77",
    "OTHER-99",
    "agent:spy",
    THEIRS,
)
# Routes an agent's bearer token does not open: each checks its own credentials or serves
# no lesson data. A new route must be added here or walked below.
NOT_FOR_AGENT_TOKENS = {
    "/static/<path:filename>",
    "/api/v1/swagger/<path:filename>",
    "/api/v1/swagger",
    "/api/v1/oauth2-redirect.html",
    "/api/v1/static/<path:filename>",
    "/api/v1/openapi.json",
    "/api/v1/",
    "/api/v1/docs",
    "/webhooks/github",
    "/webhooks/jira",
    "/healthz",
    "/readyz",
    "/metrics",
}


@pytest.fixture
def world(engine: Engine) -> dict[str, str]:
    """Lessons in acme/api, in other/repo and global, with usage, demotions and searches."""
    with db.transaction(engine) as session:

        def add(text: str, scope: str, learned_from: str) -> Bullet:
            return lifecycle.add(
                session, text, learned_from=learned_from, actor="t", scope=scope
            ).bullet

        mine = add("Pin the httpx version in the API client wrapper", MINE, "acme/api#3")
        shared = add("Retry Stripe webhooks with the event id as the key", "global", "GLOB-1")
        helpful = add(
            "Zanzibar consumers must rotate the Kafka group on schema change", THEIRS, "OTHER-7"
        )
        harmful = add("Quokka caches expire before the Kafka rebalance ends", THEIRS, "OTHER-7")
        demoted = add("Kafka partitions follow the Zanzibar tenant id", THEIRS, "OTHER-7")
        lifecycle.approve(session, helpful.id, actor="t")
        lifecycle.approve(session, harmful.id, actor="t")
        lifecycle.deprecate(
            session, demoted.id, reason="Marmalade migration replaced it", actor="t"
        )
        usage.record_once(
            session,
            "cited",
            [helpful.id],
            ticket_key="OTHER-77",
            consumer="agent:spy",
            success=True,
        )
        # Another scope's work with a global lesson: its ticket and agent stay that scope's.
        usage.record_once(
            session, "loaded", [shared.id], ticket_key="OTHER-99", consumer="agent:spy"
        )
        usage.record_once(session, "loaded", [shared.id], ticket_key="acme/api#5", consumer="bot")
        helpful.cites_success, helpful.cites_failure = 5, 0
        harmful.cites_success, harmful.cites_failure = 0, 4
        ids = {
            "mine": mine.id,
            "shared": shared.id,
            "helpful": helpful.id,
            "harmful": harmful.id,
            "demoted": demoted.id,
        }
    with db.transaction(engine) as session:
        everyone = agents.Caller(actor="t", role="maintainer")
        agents.search(session, everyone, "Zanzibar Kafka group schema", ticket="OTHER-99")
        # People's verdicts: each scope lists its off-topic lessons, the other's never shown.
        verdicts = [
            (f"OTHER-{70 + n}", lesson, "agent:spy" if n else "x")
            for n in range(3)
            for lesson in (ids["harmful"], ids["shared"])
        ]
        verdicts += [(f"acme/api#{n}", ids["mine"], f"dev{n % 2}") for n in range(3)]
        for ticket_key, bullet_id, actor in verdicts:
            verdict = labels.Verdict(
                ticket_key,
                bullet_id,
                False,
                labels.COMMAND,
                "jira",
                actor,
                "Marmalade again" if ticket_key.startswith("OTHER") else "not this",
            )
            labels.record(session, verdict)
    return ids


def leaks(answer: str, world: dict[str, str], asked: str = "") -> list[str]:
    """The other scope's ids and words found in ``answer`` (ids the request named aside)."""
    theirs = [i for i in (world["helpful"], world["harmful"], world["demoted"]) if i not in asked]
    found = [word for word in SECRETS if word in answer]
    return found + [i for i in theirs if re.search(rf"(?<![\w-]){re.escape(i)}(?!\d)", answer)]


def hidden(world: dict[str, str]) -> list[str]:
    """The other scope's lesson ids."""
    return [world["helpful"], world["harmful"], world["demoted"]]


def settings_for(database_url: str) -> Settings:
    return Settings(
        PLAYBOOK_DATABASE_URL=database_url,
        PLAYBOOK_API_TOKEN=MAINTAINER,
        PLAYBOOK_AGENT_TOKENS=f"ci@{MINE}:{SCOPED}",
        _env_file=None,
    )


def api_calls(world: dict[str, str]) -> dict[tuple[str, str], list[tuple[str, Any]]]:
    """What the scoped agent asks of each API operation: (URL, JSON body or None)."""
    ids = [world[name] for name in ("helpful", "harmful", "demoted", "shared", "mine")]
    q = "Zanzibar Kafka consumer group schema"
    v1 = "/api/v1"
    return {
        ("get", f"{v1}/lessons"): [
            (f"{v1}/lessons", None),
            (f"{v1}/lessons?scope={THEIRS}", None),
            (f"{v1}/lessons?status=deprecated", None),
            (f"{v1}/lessons?learned_from=OTHER-7", None),
            (f"{v1}/lessons?limit=1&cursor=", None),
        ],
        ("get", f"{v1}/lessons/{{id}}"): [(f"{v1}/lessons/{i}", None) for i in ids],
        ("get", f"{v1}/bullets/{{id}}"): [(f"{v1}/bullets/{i}", None) for i in ids],
        ("get", f"{v1}/search"): [
            (f"{v1}/search?q={q}", None),
            (f"{v1}/search?q={q}&k=100&ticket=acme/api%2312", None),
        ],
        ("post", f"{v1}/search"): [(f"{v1}/search", {"query": q, "k": 10, "ticket": "API-2"})],
        ("get", f"{v1}/stats"): [(f"{v1}/stats", None)],
        ("get", f"{v1}/gaps"): [(f"{v1}/gaps", None), (f"{v1}/gaps?days=366&min=2", None)],
        # Only its own scope's verdicts; naming another scope is refused without echoing it.
        ("get", f"{v1}/relevance"): [
            (f"{v1}/relevance", None),
            (f"{v1}/relevance?scope={THEIRS}", None),
        ],
        # For maintainers: an agent token gets 403, never another scope's proposals.
        ("get", f"{v1}/proposals"): [(f"{v1}/proposals", None)],
        # Consolidations too: an agent token gets 403 for every one of them.
        ("get", f"{v1}/consolidations"): [
            (f"{v1}/consolidations", None),
            (f"{v1}/consolidations?scope={THEIRS}", None),
        ],
        ("get", f"{v1}/consolidations/{{id}}"): [(f"{v1}/consolidations/1", None)],
        **{
            ("post", f"{v1}/consolidations/{{id}}/{action}"): [
                (f"{v1}/consolidations/1/{action}", {"reason": "because"})
            ]
            for action in ("accept", "reject", "undo")
        },
        ("get", f"{v1}/experiment"): [
            (f"{v1}/experiment", None),
            (f"{v1}/experiment?since=2020-01-01&until=2099-12-31T00:00:00Z", None),
        ],
        ("post", f"{v1}/lessons"): [
            # A near-copy of another scope's lesson is a new lesson here, not "a duplicate of".
            (
                f"{v1}/lessons",
                {
                    "text": "Consumers must rotate the Kafka group on schema change",
                    "learned_from": "API-3",
                },
            ),
            (f"{v1}/lessons", {"text": "x y z", "learned_from": "API-3", "scope": THEIRS}),
        ],
        ("post", f"{v1}/usage"): [
            (f"{v1}/usage", {"event": "cited", "lessonIds": [i], "ticketId": "API-4"}) for i in ids
        ],
        **{
            ("post", f"{v1}/lessons/{{id}}/{action}"): [
                (f"{v1}/lessons/{i}/{action}", {"reason": "because"}) for i in ids
            ]
            for action in ("approve", "deprecate", "restore")
        },
        ("post", f"{v1}/lessons/{{id}}/supersede"): [
            (f"{v1}/lessons/{i}/supersede", {"by": by, "reason": "because"})
            for i in ids
            for by in (world["mine"], world["helpful"])
        ],
        ("post", f"{v1}/lessons/{{id}}/anchors"): [
            (f"{v1}/lessons/{i}/anchors", {"paths": ["orders/**"], "reason": "because"})
            for i in ids
        ],
        # Possibly stale lessons: a scoped token reads its own scope's; clearing is maintainers'.
        ("get", f"{v1}/stale"): [(f"{v1}/stale", None)],
        ("post", f"{v1}/lessons/{{id}}/clear-stale"): [
            (f"{v1}/lessons/{i}/clear-stale", {"reason": "because"}) for i in ids
        ],
    }


def test_every_api_route_answers_a_scoped_agent_within_its_scope(
    engine: Engine, database_url: str, world: dict[str, str]
) -> None:
    app = create_app(settings_for(database_url), engine=engine)
    client = app.test_client()
    document = client.get("/api/v1/openapi.json").get_json()
    operations = {(method, path) for path, item in document["paths"].items() for method in item}
    calls = api_calls(world)
    assert operations == set(calls), "walk every operation of the API"
    documented = {re.sub(r"\{(\w+)\}", r"<\1>", path) for _, path in operations}
    for rule in app.url_map.iter_rules():
        assert (
            rule.rule in documented
            or rule.rule in NOT_FOR_AGENT_TOKENS
            or rule.rule.startswith("/ui")  # the maintainers' login, never a bearer token
            # The first run's setup page and the redirect to it: the setup token's cookie only.
            or rule.rule == "/"
            or rule.rule.startswith("/setup")
            or rule.rule == "/mcp"  # walked by the MCP tests below
        ), f"{rule.rule} is neither walked nor known to refuse agent tokens"

    headers = {"Authorization": f"Bearer {SCOPED}"}
    stats = client.get("/api/v1/stats", headers=headers).get_json()
    # Counts are of what the token may read: its lesson and the global one, the global
    # lesson's load in this scope's work, no search for this scope's tickets.
    assert stats["bullets"]["by_scope"] == {MINE: {"active": 1}, "global": {"active": 1}}
    assert stats["bullets"]["total"] == 2
    assert stats["most_helpful"] == stats["most_harmful"] == stats["recently_demoted"] == []
    assert stats["usage"]["loads"] == 1 and stats["usage"]["cites"] == 0
    assert stats["coverage"]["tickets"] == 0
    shared = client.get(f"/api/v1/lessons/{world['shared']}", headers=headers).get_json()
    assert [e["ticket"] for e in shared["events"]] == ["acme/api#5"]

    seen_own = False
    for (method, _), requests in calls.items():
        for url, body in requests:
            answer = client.open(url, method=method.upper(), json=body, headers=headers)
            assert answer.status_code < 500, (url, answer.text)
            asked = url + json.dumps(body)
            assert not leaks(answer.text, world, asked), (url, answer.text)
            for other in hidden(world):
                if other in asked:
                    # Asked for by id, another scope's lesson is answered as no lesson at all.
                    missing = client.open(
                        url.replace(other, "pb-99999"),
                        method=method.upper(),
                        json=json.loads(json.dumps(body).replace(other, "pb-99999")),
                        headers=headers,
                    )
                    assert answer.status_code == missing.status_code, url
                    assert answer.text == missing.text.replace("pb-99999", other), url
            seen_own = seen_own or world["mine"] in answer.text
    assert seen_own  # the walk reached real answers, not only refusals
    # The maintainer still sees everything.
    full = client.get("/api/v1/stats", headers={"Authorization": f"Bearer {MAINTAINER}"})
    assert THEIRS in full.get_json()["bullets"]["by_scope"]
    assert "Marmalade" in full.text


def tool_calls(world: dict[str, str]) -> dict[str, list[dict[str, Any]]]:
    """What the scoped agent asks of each MCP tool."""
    ids = [world[name] for name in ("helpful", "harmful", "demoted", "shared", "mine")]
    q = "Zanzibar Kafka consumer group schema"
    return {
        "search_lessons": [{"query": q}, {"query": q, "k": 100, "ticket": "API-5"}],
        "get_lesson": [{"id": i} for i in ids],
        "record_usage": [{"ticket": "API-6", "lesson_ids": [i], "kind": "cited"} for i in ids],
        "propose_lesson": [
            {
                "text": "Consumers must rotate the Kafka group on schema change",
                "learned_from": "API-7",
            }
        ],
        # For maintainers: the agent gets an error, never another scope's proposals.
        "list_proposals": [{}],
    }


async def walk_mcp(client: Client, world: dict[str, str]) -> None:
    """Call every tool, read every resource and get every prompt; nothing may leak."""
    answers: list[str] = []
    calls = tool_calls(world)
    tools = {tool.name for tool in (await client.list_tools()).tools}
    assert tools == set(calls), "walk every MCP tool"
    for name, arguments in calls.items():
        for args in arguments:
            answer = (await client.call_tool(name, args)).model_dump_json()
            assert not leaks(answer, world, json.dumps(args)), (name, args, answer)
            answers.append(answer)
    uris = [resource.uri for resource in (await client.list_resources()).resources]
    for template in (await client.list_resource_templates()).resource_templates:
        assert template.uri_template == "playbook://lessons/{id}", "walk every MCP template"
        uris += [f"playbook://lessons/{world[name]}" for name in ("helpful", "demoted", "shared")]
    for uri in uris:
        try:
            answer = (await client.read_resource(uri)).model_dump_json()
        except MCPError as error:
            answer = str(error)
        assert not leaks(answer, world, uri), (uri, answer)
        answers.append(answer)
    for prompt in (await client.list_prompts()).prompts:
        answer = (await client.get_prompt(prompt.name, {"task": "API-8"})).model_dump_json()
        assert not leaks(answer, world), (prompt.name, answer)
        answers.append(answer)
    assert any(world["shared"] in answer for answer in answers)


def run(body: Callable[[], Awaitable[None]]) -> None:
    async def guarded() -> None:
        with anyio.fail_after(120):
            await body()

    anyio.run(guarded)


def test_mcp_as_started_by_playbook_bot_mcp_stays_in_its_scope(
    engine: Engine, database_url: str, world: dict[str, str]
) -> None:
    # The stdio server's caller: the local user in PLAYBOOK_AGENT_SCOPE.
    settings = Settings(
        PLAYBOOK_DATABASE_URL=database_url, PLAYBOOK_AGENT_SCOPE=MINE, _env_file=None
    )
    server = build_server(settings, lambda: engine, local_caller(settings))

    async def body() -> None:
        async with Client(server) as client:
            await walk_mcp(client, world)

    run(body)


@pytest.fixture
def served(engine: Engine, database_url: str) -> Iterator[str]:
    with serving(create_app(settings_for(database_url), engine=engine)) as url:
        yield f"{url}/mcp"


def test_mcp_over_http_with_a_scoped_token_stays_in_its_scope(
    served: str, world: dict[str, str]
) -> None:
    async def body() -> None:
        async with (
            create_mcp_http_client(headers={"Authorization": f"Bearer {SCOPED}"}) as http,
            Client(streamable_http_client(served, http_client=http)) as client,
        ):
            await walk_mcp(client, world)

    run(body)


def test_stats_json_names_no_other_scope(engine: Engine, world: dict[str, str]) -> None:
    with db.transaction(engine) as session:
        scoped = stats_answer.stats(
            session, agents.Caller(actor="agent:ci", role="agent", scope=MINE)
        )
        everyone = stats_answer.stats(session, agents.Caller(actor="m", role="maintainer"))
    assert not leaks(json.dumps(scoped.model_dump(mode="json")), world)
    assert [row.id for row in everyone.most_helpful] == [world["helpful"]]
    assert [row.id for row in everyone.most_harmful] == [world["harmful"]]
    assert everyone.coverage.tickets == 1

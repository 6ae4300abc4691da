"""Every upper limit the OpenAPI document and the MCP tools state is enforced on what is sent.

The walk reads each maxItems, maxLength and maximum from the published schemas, sends a
valid request with just that one value one past its limit, and expects a 4xx naming the
field: a limit that is documented but not kept (or kept only after repeats are dropped)
fails here, and so does an operation or tool added without a valid request below.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any
from urllib.parse import urlencode

import anyio
import pytest
from mcp import Client
from sqlalchemy import Engine

from bot.config import Settings
from bot.mcp_server import build_server
from playbook import agents, db
from playbook.consolidation import store as consolidations
from playbook.consolidation.groups import Group
from playbook.lessons import lifecycle

TOKEN = "limits-maintainer"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
LESSON = {"text": "Retry webhooks with the event id as key", "learned_from": "CTMS-1"}
EVENT = {"event": "cited", "lessonIds": ["pb-1"], "ticketId": "CTMS-1", "rank": 1, "ts": 1}

# A valid request of each operation: (path parameters, query, JSON body).
VALID: dict[tuple[str, str], tuple[dict[str, str], dict[str, Any], Any]] = {
    ("get", "/api/v1/lessons"): ({}, {"scope": "global", "learned_from": "CTMS-1"}, None),
    ("post", "/api/v1/lessons"): ({}, {}, LESSON),
    ("get", "/api/v1/lessons/{id}"): ({"id": "pb-1"}, {}, None),
    ("get", "/api/v1/bullets/{id}"): ({"id": "pb-1"}, {}, None),
    ("post", "/api/v1/lessons/{id}/approve"): ({"id": "pb-1"}, {}, {"reason": "ok"}),
    ("post", "/api/v1/lessons/{id}/deprecate"): ({"id": "pb-1"}, {}, {"reason": "old"}),
    ("post", "/api/v1/lessons/{id}/restore"): ({"id": "pb-1"}, {}, {"reason": "ok"}),
    ("post", "/api/v1/lessons/{id}/supersede"): ({"id": "pb-2"}, {}, {"by": "pb-1"}),
    ("post", "/api/v1/lessons/{id}/clear-stale"): ({"id": "pb-1"}, {}, {"reason": "holds"}),
    ("get", "/api/v1/stale"): ({}, {}, None),
    ("post", "/api/v1/lessons/{id}/anchors"): ({"id": "pb-1"}, {}, {"paths": ["orders/**"]}),
    ("get", "/api/v1/search"): (
        {},
        {"q": "webhooks", "k": 5, "ticket": "CTMS-2", "paths": ["orders/a.py", "b/"]},
        None,
    ),
    ("post", "/api/v1/search"): ({}, {}, {"query": "webhooks", "ticket": "CTMS-2"}),
    ("get", "/api/v1/stats"): ({}, {}, None),
    ("get", "/api/v1/gaps"): ({}, {"days": 7, "min": 3}, None),
    ("get", "/api/v1/proposals"): ({}, {}, None),
    ("get", "/api/v1/relevance"): ({}, {"scope": "CTMS"}, None),
    ("get", "/api/v1/experiment"): ({}, {"since": "2026-01-01", "until": "2026-12-31"}, None),
    ("post", "/api/v1/usage"): ({}, {}, EVENT),
    # Consolidation 1 is accepted and then undone; 2 is rejected.
    ("get", "/api/v1/consolidations"): (
        {},
        {"status": "open", "scope": "global", "limit": 5},
        None,
    ),
    ("get", "/api/v1/consolidations/{id}"): ({"id": "1"}, {}, None),
    ("post", "/api/v1/consolidations/{id}/accept"): ({"id": "1"}, {}, {"text": "Merged"}),
    ("post", "/api/v1/consolidations/{id}/undo"): ({"id": "1"}, {}, {"reason": "ok"}),
    ("post", "/api/v1/consolidations/{id}/reject"): ({"id": "2"}, {}, {"reason": "no"}),
}


def resolve(schema: dict[str, Any], document: dict[str, Any]) -> dict[str, Any]:
    """``schema`` with its $ref followed."""
    while "$ref" in schema:
        schema = document["components"]["schemas"][schema["$ref"].rsplit("/", 1)[1]]
    return schema


def sample(schema: dict[str, Any], document: dict[str, Any]) -> Any:
    """A small valid value of a schema, for values the valid request leaves out."""
    schema = resolve(schema, document)
    kind = schema.get("type")
    if "anyOf" in schema or "oneOf" in schema:
        return sample((schema.get("anyOf") or schema["oneOf"])[0], document)
    if "enum" in schema:
        return schema["enum"][0]
    if kind == "array":
        return [sample(schema["items"], document)]
    if kind in {"integer", "number"}:
        return 1
    if kind == "boolean":
        return True
    if kind == "object":
        return {}
    return "a"


def fitted(schema: dict[str, Any], value: Any, document: dict[str, Any]) -> Any:
    """``value`` shaped for one branch of a union: a list for an array, an item otherwise."""
    kind = resolve(schema, document).get("type")
    if kind == "array" and not isinstance(value, list):
        return [value]
    if kind != "array" and isinstance(value, list):
        return value[0] if value else sample(schema, document)
    if kind in ("integer", "number") and not isinstance(value, int | float):
        return sample(schema, document)
    if kind == "string" and not isinstance(value, str):
        return sample(schema, document)
    return value


def beyond(
    schema: dict[str, Any], value: Any, document: dict[str, Any]
) -> Iterator[tuple[Any, str]]:
    """(``value`` with one part one past a documented limit, where that part is)."""
    schema = resolve(schema, document)
    for branch in schema.get("anyOf", []) + schema.get("oneOf", []):
        yield from beyond(branch, fitted(branch, value, document), document)
    if "maxLength" in schema:
        yield "a" * (schema["maxLength"] + 1), ""
    if "maximum" in schema:
        yield schema["maximum"] + 1, ""
    if "maxItems" in schema:
        # The same item again and again: a limit counts what is sent, not what is distinct.
        item = value[0] if isinstance(value, list) and value else sample(schema["items"], document)
        yield [item] * (schema["maxItems"] + 1), ""
    for name, part in schema.get("properties", {}).items():
        given = value if isinstance(value, dict) else {}
        current = given.get(name, sample(part, document))
        for changed, where in beyond(part, current, document):
            yield {**given, name: changed}, ".".join(filter(None, (name, where)))
    if "items" in schema:
        items = value if isinstance(value, list) and value else [sample(schema["items"], document)]
        for changed, where in beyond(schema["items"], items[0], document):
            yield [changed, *items[1:]], ".".join(filter(None, ("0", where)))


def over_limit_requests(document: dict[str, Any]) -> Iterator[tuple[str, str, Any, str]]:
    """Every (method, URL, body, field) that sends one value past its documented limit."""
    for path, item in document["paths"].items():
        for method, operation in item.items():
            params, query, body = VALID[(method, path)]
            for parameter in operation.get("parameters", []):
                name, where = parameter["name"], parameter["in"]
                current = (params if where == "path" else query).get(name)
                for changed, _ in beyond(parameter["schema"], current, document):
                    if where == "path":
                        url, asked = path.format(**{**params, name: changed}), query
                    else:
                        url, asked = path.format(**params), {**query, name: changed}
                    yield method, f"{url}?{urlencode(asked, doseq=True)}", body, name
            schema = operation.get("requestBody", {}).get("content", {}).get("application/json")
            if schema:
                for changed, where in beyond(schema["schema"], body, document):
                    field = next(
                        (p for p in reversed(where.split(".")) if p and not p.isdigit()), "body"
                    )
                    yield (
                        method,
                        f"{path.format(**params)}?{urlencode(query, doseq=True)}",
                        changed,
                        field,
                    )


@pytest.fixture
def client(engine: Engine, shared_app: Any) -> Any:
    """A client of the module's app (its tests only send requests), with lessons and
    consolidations to act on."""
    with db.transaction(engine) as session:
        lifecycle.add(session, LESSON["text"], learned_from="CTMS-1", actor="t")
        # pb-2, for pb-1 to supersede.
        lifecycle.add(session, "Never hold a lock across HTTP", learned_from="CTMS-2", actor="t")
        # Consolidations 1 and 2, of pb-3 and pb-4, and of pb-5 and pb-6.
        texts = ("Pin base images", "Sign releases", "Vendor fonts", "Cache wheels in CI")
        added = [lifecycle.add(session, t, learned_from="CTMS-3", actor="t") for t in texts]
        made = []
        for pair in (added[:2], added[2:]):
            group = Group(member_ids=tuple(a.bullet.id for a in pair), similarity=0.9)
            made += consolidations.propose(session, "global", [group])
        first, second = (str(c.id) for c in made)
    # PostgreSQL's sequences do not start again for each test: the ids are the ones made here.
    for action, number in (("", first), ("/accept", first), ("/undo", first), ("/reject", second)):
        method = "get" if not action else "post"
        key = (method, f"/api/v1/consolidations/{{id}}{action}")
        VALID[key] = ({"id": number}, *VALID[key][1:])
    return shared_app(api_token=TOKEN).test_client()


def test_every_documented_api_limit_is_enforced_on_what_is_sent(client: Any) -> None:
    document = client.get("/api/v1/openapi.json").get_json()
    operations = {(m, p) for p, item in document["paths"].items() for m in item}
    assert operations == set(VALID), "give every operation a valid request"
    for (method, path), (params, query, body) in VALID.items():
        url = f"{path.format(**params)}?{urlencode(query, doseq=True)}"
        answer = client.open(url, method=method.upper(), json=body, headers=AUTH)
        assert answer.status_code < 400, (url, answer.text)

    checked = set()
    for method, url, body, field in over_limit_requests(document):
        answer = client.open(url, method=method.upper(), json=body, headers=AUTH)
        assert answer.status_code in (400, 422), (method, url, field, answer.status_code)
        problem = answer.get_json()
        assert answer.mimetype == "application/problem+json"
        assert field in problem.get("field", ""), (url, field, problem)
        checked.add(field)
    # The walk reached the limits the issue names, not an empty schema.
    assert {"lessonIds", "body", "tags", "text", "q", "k", "limit", "id", "rank"} <= checked


def test_a_hundred_thousand_copies_of_one_id_are_refused(client: Any) -> None:
    for body in (
        {**EVENT, "lessonIds": ["pb-1"] * 100_000},
        # The older name, in a list.
        [EVENT, {"event": "loaded", "lessonId": ["pb-1"] * 201, "ticketId": "CTMS-1"}],
    ):
        answer = client.post("/api/v1/usage", json=body, headers=AUTH)
        assert answer.status_code == 400, answer.text
        assert "lessonIds" in answer.get_json()["field"]
        assert "200" in answer.get_json()["detail"]
    assert client.get("/api/v1/lessons/pb-1", headers=AUTH).get_json()["cites"] == 0
    answer = client.post("/api/v1/usage", json={**EVENT, "lessonIds": ["pb-1"] * 200}, headers=AUTH)
    assert answer.status_code == 201  # at the limit, repeats are still one mention


# A valid call of each MCP tool.
TOOLS: dict[str, dict[str, Any]] = {
    "search_lessons": {"query": "webhooks", "k": 5, "ticket": "CTMS-3"},
    "get_lesson": {"id": "pb-1"},
    "record_usage": {"ticket": "CTMS-3", "lesson_ids": ["pb-1"], "kind": "loaded"},
    "propose_lesson": {"text": "Log the delivery id", "learned_from": "CTMS-3", "tags": ["x"]},
    "list_proposals": {},
}


def test_every_documented_mcp_limit_is_enforced(engine: Engine, database_url: str) -> None:
    with db.transaction(engine) as session:
        lifecycle.add(session, LESSON["text"], learned_from="CTMS-1", actor="t")
    settings = Settings(PLAYBOOK_DATABASE_URL=database_url, _env_file=None)
    # A maintainer, over HTTP: list_proposals is for maintainers; the limits are the same.
    maintainer = agents.Caller(actor="mcp:limits", role="maintainer")
    server = build_server(settings, lambda: engine, lambda _ctx: maintainer)

    async def session() -> None:
        async with Client(server) as client:
            tools = {tool.name: tool for tool in (await client.list_tools()).tools}
            assert set(tools) == set(TOOLS), "give every tool a valid call"
            checked = set()
            for name, valid in TOOLS.items():
                assert not (await client.call_tool(name, valid)).is_error, name
                document: dict[str, Any] = {"components": {"schemas": {}}}
                for changed, where in beyond(tools[name].input_schema, valid, document):
                    result = await client.call_tool(name, changed)
                    field = where.split(".")[0]
                    assert result.is_error, (name, where)
                    text = " ".join(block.text for block in result.content)
                    assert field in text, (name, where, text)
                    checked.add(f"{name}.{field}")
            assert {"search_lessons.k", "record_usage.lesson_ids"} <= checked

    anyio.run(session)

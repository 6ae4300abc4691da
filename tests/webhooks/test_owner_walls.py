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

import functools
import inspect
import json
import re
import sys
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote, urlencode

import anyio
import click
import pytest
from mcp import Client, MCPError, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from sqlalchemy import Engine, LargeBinary, select, update

from bot.cli import main
from bot.config import Settings
from playbook import agents, clock, db
from playbook.consolidation import store as consolidations
from playbook.consolidation.groups import Group
from playbook.experiment import holdout
from playbook.lessons import lifecycle
from playbook.models import Base, Bullet, Rating
from playbook.outcomes import usage
from tests.support import serving
from webhooks.app import create_app

ATTACKER = "evil/app"
TOKEN = "walk-evil-app-token"
MAINTAINER = "walk-maintainer-token"
SALT = "walk-experiment-salt"
# Another owner, a Jira project, and a repository whose name starts with the attacker's.
VICTIMS = ("victim/secret", "CTMS", "evil/app-internal")
OWN_TICKET = "evil/app#9"
QUERY = "payroll database password rotation ledger export"
# Words only the victims' rows hold: texts, reasons, gap tickets' summaries, their agent.
WORDS = ("VICTIMWORD", "VICTIMREASON", "ZUGZWANG", "agent:victim")
# Columns of free text: a row is a victim's by its ids, tickets and scope, not by words
# (an attacker may write a lesson that mentions a victim's id; that is its own lesson).
FREE_TEXT_COLUMNS = {
    "text",
    "title",
    "body",
    "draft",
    "reason",
    "demoted_reason",
    "detail",
    "payload",
    "last_error",
    "last_traceback",
    "before",
    "after",
    "headers",
    "paused_reason",
    "last_result",
    "dropped_terms",
    "tags",
}
# Request fields of free text: naming a victim's id in them is the caller's own words.
FREE_TEXT_FIELDS = {"text", "query", "q", "reason", "tags", "phase", "consumer", "task", "cursor"}
# Opaque strings of the caller's own (a search's id it echoes back): no scope's key.
FREE_TEXT_FIELDS |= {"queryId", "query_id"}
MISSING_ID = "pb-99999"
MISSING_CONSOLIDATION = "99999"
# Routes outside the OpenAPI document that the walk does not call with the token: the MCP
# endpoint is walked by an MCP client below.
NOT_PLAIN_ROUTES = {"/mcp"}
# Reads that record: a search with a ticket loads its lessons for it. Every other GET only
# reads (and a GET that wrote a victim's row would fail the row check anyway).
RECORDING_READS = {("GET", "/api/v1/search")}


def ticket(scope: str, number: int) -> str:
    """A ticket key of ``scope``: owner/repo#N or PROJ-N."""
    return f"{scope}#{number}" if "/" in scope else f"{scope}-{number}"


@dataclass
class World:
    """The playbook walked: the attacker's lesson, a global one, and the victims' rows."""

    own: str
    shared: str
    ids: dict[str, list[str]] = field(default_factory=dict)  # victim scope: its lesson ids
    tickets: dict[str, list[str]] = field(default_factory=dict)  # victim scope: its tickets
    consolidations: list[int] = field(default_factory=list)

    @property
    def victim_ids(self) -> list[str]:
        """Every victim lesson id."""
        return [i for ids in self.ids.values() for i in ids]

    @property
    def victim_tickets(self) -> list[str]:
        """Every victim ticket key."""
        return [t for tickets in self.tickets.values() for t in tickets]

    def values(self) -> list[str]:
        """What the walk puts in each string argument: a scope, a ticket, two ids of each."""
        found: list[str] = []
        for scope in VICTIMS:
            found += [scope, self.tickets[scope][0], self.ids[scope][0], self.ids[scope][3]]
        return found

    def missing(self, value: str) -> str | None:
        """The same kind of value naming nothing: for answers that must not tell them apart."""
        if value in self.victim_ids:
            return MISSING_ID
        if value in {str(i) for i in self.consolidations}:
            return MISSING_CONSOLIDATION
        for scope in VICTIMS:
            if value in self.tickets[scope]:
                return ticket(scope, 99999)
        return None

    @functools.cached_property
    def pattern(self) -> re.Pattern[str]:
        """``key_pattern``, built once the world is (it is read after every call)."""
        return self.key_pattern()

    def key_pattern(self) -> re.Pattern[str]:
        """Ids, tickets and scope names of the victims, as whole words."""
        ids = "|".join(re.escape(i) for i in self.victim_ids)
        # CTMS-4410 is the example the MCP guide and error messages give for any Jira key.
        scopes = "|".join(
            re.escape(s) + (r"(?!-4410(?!\d))" if "/" not in s else "") for s in VICTIMS
        )
        return re.compile(rf"(?<![\w-])(?:{ids})(?!\d)|(?<![\w./-])(?:{scopes})(?![\w.])")

    def leaks(self, answer: str, request: str) -> list[str]:
        """The victims' ids, tickets, scopes and words in ``answer`` the request did not name."""
        found = [m.group(0) for m in self.pattern.finditer(answer)]
        found += [w for w in WORDS if w.lower() in answer.lower()]
        return sorted({f for f in found if f.lower() not in request.lower()})


def build(engine: Engine) -> World:
    """The attacker's lesson and gap, a global lesson, and in each victim scope: lessons in
    every status, usage of its own and the global lesson, a rating, searches that form a gap,
    an experiment arm, a consolidation proposal."""
    maintainer = agents.Caller(actor="walk-maintainer", role="maintainer")

    with db.transaction(engine) as session:

        def add(text: str, scope: str, learned_from: str, status: str = "active") -> str:
            result = lifecycle.add(
                session, text, learned_from=learned_from, actor="t", scope=scope, status=status
            )
            assert result.created, text
            return result.bullet.id

        shared = add(
            "Retry Stripe webhooks with the event id as the idempotency key", "global", "G-1"
        )
        own = add(
            "Pin the chromium version of the payroll PDF renderer in CI", ATTACKER, "evil/app#1"
        )
        # Victim ids from pb-500 on: never pb-12 or pb-31, the examples of the docs and errors.
        session.execute(update(Bullet).where(Bullet.id == own).values(number=499))
        usage.record_once(session, "loaded", [shared], ticket_key="evil/app#2", consumer="bot")
        world = World(own=own, shared=shared)
        for n, scope in enumerate(VICTIMS):
            t = [
                ticket(scope, 41 + n),
                ticket(scope, 42 + n),
                *(ticket(scope, 51 + i) for i in range(3)),
            ]
            world.tickets[scope] = t
            active = add(
                f"Rotate the payroll database password monthly VICTIMWORD{n}a", scope, t[0]
            )
            other = add(f"Ledger exports VICTIMWORD{n}b wait for the nightly close", scope, t[0])
            proposed = add(f"VICTIMWORD{n}c payroll secrets live in vault", scope, t[1], "proposed")
            deprecated = add(f"VICTIMWORD{n}d keep the payroll password in env", scope, t[1])
            replaced = add(f"VICTIMWORD{n}e rotate database credentials by hand", scope, t[1])
            lifecycle.deprecate(
                session,
                deprecated,
                reason=f"VICTIMREASON leaked the payroll DB password ({scope})",
                actor="t",
            )
            lifecycle.supersede(session, replaced, active, actor="t", reason="VICTIMREASON merged")
            world.ids[scope] = [active, other, proposed, deprecated, replaced]
            usage.record_once(
                session,
                "cited",
                [active],
                ticket_key=t[0],
                consumer="agent:victim",
                source="agent:victim",
                success=True,
            )
            # The global lesson in the victim's work: its ticket and agent stay the victim's.
            usage.record_once(
                session,
                "loaded",
                [shared],
                ticket_key=t[1],
                consumer="agent:victim",
                source="agent:victim",
            )
            session.add(
                Rating(
                    bullet_id=shared,
                    ticket_key=t[1],
                    pr_key=ticket("victim/secret", 70 + n),
                    score=-1.0,
                    reason="VICTIMREASON went against it",
                    model="m",
                    prompt_version="1",
                    rated_at=clock.now(),
                )
            )
            (proposal,) = consolidations.propose(
                session, scope, [Group(member_ids=(active, other), similarity=0.9)]
            )
            world.consolidations.append(proposal.id)
    with db.transaction(engine) as session:
        for scope in VICTIMS:
            # Three tickets no lesson fits, alike: a gap of the victim's.
            for key in world.tickets[scope][2:]:
                agents.search(
                    session,
                    maintainer,
                    f"ZUGZWANG quarterly reconciliation stalls in the overnight batch {key}",
                    ticket=key,
                )
            # An arm of the holdout for the victim's first ticket.
            agents.search(
                session,
                maintainer,
                QUERY,
                ticket=world.tickets[scope][0],
                experiment=holdout.Config(percent=50, salt=SALT),
            )
        # The attacker's own gap: its answers must still show it.
        for number in (5, 6, 7):
            agents.search(
                session,
                maintainer,
                f"Login redirect loops after the session cookie expires, case {number}",
                ticket=ticket(ATTACKER, number),
            )
    return world


def victim_rows(engine: Engine, world: World) -> set[str]:
    """Every row, in every table, whose ids, tickets or scope are a victim's, as JSON."""
    pattern = world.pattern
    rows: set[str] = set()
    with engine.connect() as connection:
        for table in Base.metadata.sorted_tables:
            # Binary columns (the search index's snapshot, a salt) name no scope.
            columns = [c for c in table.columns if not isinstance(c.type, LargeBinary)]
            for row in connection.execute(select(*columns)).mappings():
                keys = {k: v for k, v in row.items() if k not in FREE_TEXT_COLUMNS}
                if pattern.search(json.dumps(keys, default=str)):
                    rows.add(f"{table.name} {json.dumps(dict(row), default=str, sort_keys=True)}")
    return rows


# -- what to send -------------------------------------------------------------------------------


def resolve(schema: dict[str, Any], components: dict[str, Any]) -> dict[str, Any]:
    """``schema`` with references followed and optional (``anyOf`` with null) unwrapped."""
    while True:
        if "$ref" in schema:
            schema = components[schema["$ref"].rsplit("/", 1)[1]]
        elif "anyOf" in schema or "oneOf" in schema:
            options = [
                s for s in schema.get("anyOf", schema.get("oneOf")) if s.get("type") != "null"
            ]
            schema = options[0]
        else:
            return schema


def plain(name: str, schema: dict[str, Any], components: dict[str, Any], world: World) -> Any:
    """A valid value of the attacker's own for a field: its ticket, its lesson, a query."""
    schema = resolve(schema, components)
    if "enum" in schema:
        return schema["enum"][0]
    if "const" in schema:
        return schema["const"]
    kind = schema.get("type")
    if kind == "array":
        return [plain(name, schema.get("items", {}), components, world)]
    if kind == "object":
        required = schema.get("required", [])
        properties = schema.get("properties", {})
        return {k: plain(k, v, components, world) for k, v in properties.items() if k in required}
    if kind in {"integer", "number"}:
        if name == "min":
            return 2
        return schema.get("maximum", schema.get("minimum", 1))
    if kind == "boolean":
        return False
    lowered = name.lower()
    if "ticket" in lowered or lowered == "learned_from":
        return OWN_TICKET
    if lowered in ("id", "by") or "lesson" in lowered:
        return world.own
    if lowered == "scope":
        return ATTACKER
    return QUERY


def takes_text(schema: dict[str, Any], components: dict[str, Any]) -> str | None:
    """``"string"`` or ``"array"`` when a victim's value fits the field (as is, or listed)."""
    schema = resolve(schema, components)
    if "enum" in schema or "const" in schema:
        return None
    if schema.get("type") == "string":
        return "string"
    if schema.get("type") == "array" and takes_text(schema.get("items", {}), components):
        return "array"
    return None


@dataclass(frozen=True)
class Probe:
    """One call: its arguments, and which field holds a victim's value (None: plain)."""

    arguments: dict[str, Any]
    field: str | None = None
    value: str | None = None

    @property
    def names_victim_key(self) -> bool:
        """A victim's value in a field that is not free text: a write must be refused."""
        return self.field is not None and self.field not in FREE_TEXT_FIELDS


def probes(
    properties: dict[str, Any], required: list[str], components: dict[str, Any], world: World
) -> list[Probe]:
    """The plain arguments (the required ones), then each text field holding each victim value."""
    base = {
        name: plain(name, schema, components, world)
        for name, schema in properties.items()
        if name in required
    }
    found = [Probe(base)]
    for name, schema in properties.items():
        shape = takes_text(schema, components)
        if shape is None:
            continue
        for value in world.values():
            changed = {**base, name: [value] if shape == "array" else value}
            found.append(Probe(changed, name, value))
    return found


def swap(data: Any, value: str, other: str) -> Any:
    """``data`` (JSON-like) with every ``value`` replaced by ``other``."""
    return json.loads(json.dumps(data).replace(json.dumps(value)[1:-1], json.dumps(other)[1:-1]))


def renamed(answer: str, value: str, other: str) -> str:
    """``answer`` with ``value`` (as a whole id, number or key) replaced by ``other``."""
    return re.sub(rf"(?<![\w-]){re.escape(value)}(?![\w-])", other, answer)


# -- checks ---------------------------------------------------------------------------------------


@dataclass
class Walk:
    """The checks every answer gets, and what the walk reached."""

    engine: Engine
    world: World
    before: set[str]
    calls: int = 0
    own_answers: int = 0

    def check(
        self, what: str, answer: str, request: str, probe: Probe, refused: bool, writes: bool
    ) -> None:
        """No leak, no victim row changed, a write naming a victim's key refused."""
        self.calls += 1
        assert not self.world.leaks(answer, request), (
            what,
            self.world.leaks(answer, request),
            answer,
        )
        assert victim_rows(self.engine, self.world) == self.before, (
            what,
            "changed a victim's rows",
        )
        if probe.names_victim_key and writes:
            assert refused, (what, "a write naming another scope's key was not refused", answer)
        if self.world.own in answer or "evil/app#5" in answer:
            self.own_answers += 1


def api_operations(document: dict[str, Any]) -> Iterator[tuple[str, str, dict[str, Any]]]:
    """(method, path, operation) of the OpenAPI document."""
    for path, item in document["paths"].items():
        for method, operation in item.items():
            yield method.upper(), path, operation


def path_values(schema: dict[str, Any], world: World) -> tuple[list[str], str]:
    """A path parameter's victim values (lesson or proposal ids), and a value of its own."""
    if schema.get("type") == "integer":
        return [str(i) for i in world.consolidations], MISSING_CONSOLIDATION
    return world.victim_ids, world.own


@dataclass(frozen=True)
class Request:
    """One API call: path parameters, query and body, and the probe that made it."""

    method: str
    path: str
    in_path: dict[str, str]
    query: dict[str, Any]
    body: Any
    probe: Probe

    def url(self) -> str:
        """The concrete URL."""
        path = self.path
        for name, value in self.in_path.items():
            path = path.replace(f"{{{name}}}", quote(value, safe=""))
        return path + ("?" + urlencode(self.query, doseq=True) if self.query else "")

    def twin(self, value: str, other: str) -> Request:
        """The same call with ``value`` replaced by ``other`` wherever it was put."""
        return Request(
            self.method,
            self.path,
            {k: other if v == value else v for k, v in self.in_path.items()},
            swap(self.query, value, other),
            swap(self.body, value, other),
            self.probe,
        )


def api_requests(
    method: str, path: str, operation: dict[str, Any], components: dict[str, Any], world: World
) -> list[Request]:
    """Plain arguments on each victim path value and on its own; each victim value in each
    query and body field, on its own path."""
    parameters = operation.get("parameters", [])
    in_query = {p["name"]: p.get("schema", {}) for p in parameters if p["in"] == "query"}
    needed = [p["name"] for p in parameters if p["in"] == "query" and p.get("required")]
    query_probes = probes(in_query, needed, components, world)
    content = operation.get("requestBody", {}).get("content", {}).get("application/json", {})
    has_body = "schema" in content
    body_probes = [Probe({})]
    if has_body:
        resolved = resolve(content["schema"], components)
        properties, required = resolved.get("properties", {}), resolved.get("required", [])
        body_probes = probes(properties, required, components, world)
    own: dict[str, str] = {}
    victims: list[tuple[str, str]] = []
    for parameter in (p for p in parameters if p["in"] == "path"):
        values, own[parameter["name"]] = path_values(parameter.get("schema", {}), world)
        victims += [(parameter["name"], value) for value in values]
    plain_query, plain_body = query_probes[0].arguments, body_probes[0].arguments

    def request(in_path: dict[str, str], query: dict[str, Any], body: Any, probe: Probe) -> Request:
        return Request(method, path, in_path, query, body if has_body else None, probe)

    found = [request(own, plain_query, plain_body, Probe({}))]
    found += [
        request({**own, name: value}, plain_query, plain_body, Probe({}, name, value))
        for name, value in victims
    ]
    found += [request(own, q.arguments, plain_body, q) for q in query_probes[1:]]
    found += [request(own, plain_query, b.arguments, b) for b in body_probes[1:]]
    return found


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


def text_of(result: Any) -> str:
    """A tool result or a protocol error as the text the agent reads."""
    return result.model_dump_json() if not isinstance(result, str) else result


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

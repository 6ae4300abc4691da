"""What the owner-wall walk sends and how it checks each answer, from the documents alone.

Arguments are made from an operation's or tool's JSON schema: its required fields with the
attacker's own values, then each text field holding each victim value. Nothing here names a
route or a tool, so one added later is walked the same way.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlencode

from sqlalchemy import Engine

from tests.webhooks.owner_walls_world import (
    ATTACKER,
    FREE_TEXT_FIELDS,
    MISSING_CONSOLIDATION,
    OWN_TICKET,
    QUERY,
    World,
    victim_rows,
)

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

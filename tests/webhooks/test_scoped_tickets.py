"""A token bound to one scope names only its scope's tickets: in searches, reports, proposals.

Searching with another scope's ticket (or one of no scope at all) would record loads, the
searched text, would-have-shown exposures and a holdout arm against that ticket, and the
answer (held out or not) would tell its arm; a usage report on it would put the token's
events into that scope's numbers; a lesson learned from it would be approved or demoted by
that ticket's pull requests. Every door refuses it with 403 naming the field, recording
nothing. ``acme/api-internal#3`` is not ``acme/api``'s: a prefix is not a scope.
"""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from mcp import Client
from sqlalchemy import Engine, func, select

from bot.config import Settings
from bot.mcp_server import build_server, local_caller
from playbook import agents, db
from playbook.experiment import assignment
from playbook.lessons import lifecycle
from playbook.models import (
    Bullet,
    ExperimentAssignment,
    ExperimentExposure,
    Retrieval,
    SeenTicket,
    UsageEvent,
)
from playbook.outcomes import usage
from webhooks.app import create_app

SCOPED = "scoped-acme-api-token"
JIRA = "scoped-ops-token"
UNSCOPED = "unscoped-agent-token"
MAINTAINER = "tickets-maintainer-token"
QUERY = "Stripe webhook retries with an idempotency key"
# Not acme/api's work: another owner, a Jira key, names that start like it, other spellings,
# a repository without a number, words.
FOREIGN = (
    "victim/secret#41",
    "CTMS-4410",
    "acme/api-internal#3",
    "acme/api-3",
    "acme/api.x#3",
    "acme/apix#3",
    "ACME/API#3",
    "acme/api",
    "acme/api/x#3",
    "fix the login page",
)


@pytest.fixture
def shared(engine: Engine) -> str:
    """A global lesson that every search above finds."""
    with db.transaction(engine) as session:
        return lifecycle.add(
            session,
            "Retry Stripe webhooks with the event id as the idempotency key",
            learned_from="G-1",
            actor="t",
        ).bullet.id


def app_settings(settings: Settings, **changes: Any) -> Settings:
    """Scoped, Jira-scoped and unscoped agent tokens; the holdout on at 50%."""
    return settings.model_copy(
        update={
            "api_token": MAINTAINER,
            "agent_tokens": f"ci@acme/api:{SCOPED},ops@OPS:{JIRA},bot:{UNSCOPED}",
            "holdout_percent": 50,
            "agent_writes_per_minute": 0,
            **changes,
        }
    )


@pytest.fixture
def client(settings: Settings, engine: Engine) -> Any:
    """A client of the app."""
    return create_app(app_settings(settings), engine=engine).test_client()


def recorded(engine: Engine, key: str) -> list[str]:
    """What any table holds about ticket ``key`` (either spelling)."""
    keys = {key, assignment.canonical(key)}
    found: list[str] = []
    with engine.connect() as connection:
        for table in (UsageEvent, Retrieval, ExperimentAssignment, ExperimentExposure, SeenTicket):
            count = connection.scalar(
                select(func.count()).select_from(table).where(table.ticket_key.in_(keys))
            )
            if count:
                found.append(f"{table.__tablename__}: {count}")
        learned = connection.scalar(
            select(func.count()).select_from(Bullet).where(Bullet.learned_from.in_(keys))
        )
        if learned:
            found.append(f"bullets: {learned}")
    return found


def forbidden(answer: Any, field: str) -> None:
    """A 403 problem naming ``field``, in its words too."""
    assert answer.status_code == 403, answer.text
    problem = answer.get_json()
    assert problem["field"] == field, problem
    assert problem["detail"].split(" ", 1)[0] in (field, "event"), problem
    assert "scope acme/api" in problem["detail"], problem


@pytest.mark.parametrize("key", FOREIGN)
def test_a_scoped_token_cannot_record_anything_against_another_scopes_ticket(
    client: Any, engine: Engine, shared: str, key: str
) -> None:
    headers = {"Authorization": f"Bearer {SCOPED}"}
    forbidden(
        client.get("/api/v1/search", query_string={"q": QUERY, "ticket": key}, headers=headers),
        "ticket",
    )
    forbidden(
        client.post("/api/v1/search", json={"query": QUERY, "ticket": key}, headers=headers),
        "ticket",
    )
    event = {"event": "cited", "lessonIds": [shared], "ticketId": key}
    forbidden(client.post("/api/v1/usage", json=event, headers=headers), "ticketId")
    forbidden(client.post("/api/v1/usage", json=[event], headers=headers), "body[0].ticketId")
    lesson = {"text": "Name the Stripe event id in every retry log line", "learned_from": key}
    forbidden(client.post("/api/v1/lessons", json=lesson, headers=headers), "learned_from")
    assert recorded(engine, key) == []
    # The maintainer may name any ticket: the scope rule binds scoped tokens only.
    maintainer = {"Authorization": f"Bearer {MAINTAINER}"}
    answer = client.get(
        "/api/v1/search", query_string={"q": QUERY, "ticket": key}, headers=maintainer
    )
    assert answer.status_code == 200, answer.text


def test_a_scoped_token_records_its_own_tickets_as_before(
    client: Any, engine: Engine, shared: str
) -> None:
    for token, key in ((SCOPED, "acme/api#3"), (JIRA, "OPS-7"), (UNSCOPED, "victim/secret#41")):
        headers = {"Authorization": f"Bearer {token}"}
        found = client.get(
            "/api/v1/search", query_string={"q": QUERY, "ticket": key}, headers=headers
        )
        assert found.status_code == 200, found.text
        answer = found.get_json()
        assert answer["ticket"] == key
        # Shown (a load) or held out (an exposure): either way the ticket has its arm now.
        assert answer["loads_recorded"] == 1 or answer.get("held_out"), answer
        event = {"event": "cited", "lessonIds": [shared], "ticketId": key}
        assert client.post("/api/v1/usage", json=event, headers=headers).status_code == 201
        lesson = {"text": f"Log the Stripe event id on {key}", "learned_from": key}
        assert client.post("/api/v1/lessons", json=lesson, headers=headers).status_code == 201
        assert recorded(engine, key)
    # A Jira scope's key holds no '/' or '#': OPS-7/x#1 is a repository's, not OPS's.
    headers = {"Authorization": f"Bearer {JIRA}"}
    refused = client.post(
        "/api/v1/search", json={"query": QUERY, "ticket": "OPS-7/x#1"}, headers=headers
    )
    assert refused.status_code == 403 and refused.get_json()["field"] == "ticket"


def test_mcp_tools_refuse_another_scopes_ticket_naming_the_argument(
    settings: Settings, engine: Engine, shared: str
) -> None:
    configured = app_settings(settings, agent_scope="acme/api")
    server = build_server(configured, lambda: engine, local_caller(configured))
    key = "acme/api-internal#3"
    calls = {
        "search_lessons": ({"query": QUERY, "ticket": key}, "ticket"),
        "record_usage": ({"ticket": key, "lesson_ids": [shared], "kind": "cited"}, "ticket"),
        "propose_lesson": (
            {"text": "Name the Stripe event id in retry logs", "learned_from": key},
            "learned_from",
        ),
    }

    async def body() -> None:
        with anyio.fail_after(60):
            await calls_made()

    async def calls_made() -> None:
        async with Client(server) as client:
            for name, (arguments, field) in calls.items():
                result = await client.call_tool(name, arguments)
                assert result.is_error, (name, result)
                text = " ".join(block.text for block in result.content)
                assert f"{field} '{key}' is not work in this token's scope acme/api" in text
            own = await client.call_tool("search_lessons", {"query": QUERY, "ticket": "acme/api#3"})
            assert not own.is_error

    anyio.run(body)
    assert recorded(engine, key) == []


def test_a_look_alike_repositorys_work_stays_out_of_a_scoped_view(
    client: Any, engine: Engine, shared: str
) -> None:
    """acme/api-internal's usage of a global lesson, and its gap, are not acme/api's."""
    maintainer = agents.Caller(actor="m", role="maintainer")
    with db.transaction(engine) as session:
        usage.record_once(
            session, "loaded", [shared], ticket_key="acme/api-internal#3", consumer="x"
        )
        usage.record_once(session, "loaded", [shared], ticket_key="acme/api#5", consumer="bot")
        for number in (7, 8, 9):
            agents.search(
                session,
                maintainer,
                f"Kubernetes ingress drops websocket upgrades behind the proxy {number}",
                ticket=f"acme/api-internal#{number}",
            )
    headers = {"Authorization": f"Bearer {SCOPED}"}
    lesson = client.get(f"/api/v1/lessons/{shared}", headers=headers).get_json()
    assert [event["ticket"] for event in lesson["events"]] == ["acme/api#5"]
    gaps = client.get("/api/v1/gaps?min=2", headers=headers)
    assert gaps.get_json()["tickets"] == 0 and "internal" not in gaps.text
    stats = client.get("/api/v1/stats", headers=headers).get_json()
    assert stats["coverage"]["tickets"] == 0 and stats["usage"]["loads"] == 1
    everything = client.get("/api/v1/gaps?min=2", headers={"Authorization": f"Bearer {MAINTAINER}"})
    assert "acme/api-internal#7" in everything.text

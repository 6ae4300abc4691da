"""GET /api/v1/gaps: the gaps for maintainer and agent tokens, a scoped agent's own only."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import Engine, select

from playbook.db import transaction
from playbook.models import Retrieval
from tests.gaps_world import CLUSTER, OTHERS, searched

MAINTAINER = {"Authorization": "Bearer maintainer-token"}
AGENT = {"Authorization": "Bearer agent-token-1"}
SCOPED = {"Authorization": "Bearer ops-token-1"}


@pytest.fixture
def client(shared_app: Any) -> Any:
    """A client of the module's app (its tests only send requests)."""
    tokens = {
        "api_token": "maintainer-token",
        "agent_tokens": "bot:agent-token-1,ops-bot@OPS:ops-token-1",
        "jira_url": "https://jira.example.com/",
    }
    return shared_app(**tokens).test_client()


def test_maintainer_and_agent_tokens_get_the_gaps(engine: Engine, client: Any) -> None:
    searched(engine, OTHERS + CLUSTER)
    for headers in (MAINTAINER, AGENT):
        answer = client.get("/api/v1/gaps?days=7&min=3", headers=headers)
        assert answer.status_code == 200, answer.text
        assert answer.mimetype == "application/json"
        body = answer.get_json()
        assert (body["days"], body["min"], body["tickets"], body["without_lessons"]) == (
            7,
            3,
            14,
            14,
        )
        [gap] = body["gaps"]
        assert gap["size"] == 4
        assert {"kafka", "rebalance"} <= set(gap["words"])
        assert gap["tickets"][0]["url"] == "https://jira.example.com/browse/CTMS-101"
        assert gap["tickets"][0]["title"] == CLUSTER[0][1]


def test_without_a_token_the_answer_is_401(client: Any) -> None:
    answer = client.get("/api/v1/gaps")
    assert answer.status_code == 401
    assert answer.mimetype == "application/problem+json"
    bad = client.get("/api/v1/gaps", headers={"Authorization": "Bearer nope"})
    assert bad.status_code == 401


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ("days=0", "days"),
        ("days=367", "days"),
        ("days=week", "days"),
        ("min=1", "min"),
        ("min=many", "min"),
        ("colour=red", "colour"),
    ],
)
def test_bad_values_are_a_400_problem_naming_the_parameter(
    client: Any, query: str, field: str
) -> None:
    answer = client.get(f"/api/v1/gaps?{query}", headers=MAINTAINER)
    assert answer.status_code == 400
    assert answer.mimetype == "application/problem+json"
    assert answer.get_json()["field"] == field


def test_an_agent_bound_to_a_scope_sees_only_its_tickets(engine: Engine, client: Any) -> None:
    theirs = [
        (f"CTMS-{n}", "Zanzibar " + title, body) for n, (_, title, body) in enumerate(CLUSTER, 900)
    ]
    mine = [(f"OPS-{n}", title, body) for n, (_, title, body) in enumerate(CLUSTER[:3], 1)]
    searched(engine, OTHERS + theirs + mine)
    answer = client.get("/api/v1/gaps", headers=SCOPED)
    assert answer.status_code == 200
    body = answer.get_json()
    assert body["tickets"] == 3
    assert [[t["key"] for t in gap["tickets"]] for gap in body["gaps"]] == [
        ["OPS-1", "OPS-2", "OPS-3"]
    ]
    assert "CTMS" not in answer.text and "Zanzibar" not in answer.text
    # The maintainer sees every ticket: the same problem in both scopes, one group.
    everything = client.get("/api/v1/gaps", headers=MAINTAINER).get_json()
    assert [gap["size"] for gap in everything["gaps"]] == [7]


def test_the_route_is_in_the_openapi_document(client: Any) -> None:
    document = client.get("/api/v1/openapi.json").get_json()
    operation = document["paths"]["/api/v1/gaps"]["get"]
    assert {p["name"] for p in operation["parameters"]} == {"days", "min"}
    assert "200" in operation["responses"] and "400" in operation["responses"]


def test_an_agents_search_keeps_its_text_but_not_as_the_tickets_title(
    engine: Engine, client: Any
) -> None:
    searched(engine, OTHERS + CLUSTER)
    query = {"query": "kafka consumer rebalance loop, offset commit fails", "ticket": "CTMS-101"}
    assert client.post("/api/v1/search", json=query, headers=AGENT).status_code == 200
    with transaction(engine) as session:
        [(title, text)] = session.execute(
            select(Retrieval.title, Retrieval.text)
            .where(Retrieval.ticket_key == "CTMS-101")
            .order_by(Retrieval.id.desc())
            .limit(1)
        )
    assert (title, text) == (None, query["query"])
    [gap] = client.get("/api/v1/gaps", headers=MAINTAINER).get_json()["gaps"]
    assert gap["tickets"][0]["title"] == CLUSTER[0][1]

"""GET /api/v1/relevance: the fit report for maintainers and agents, a scoped token's own only."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import Engine

from playbook.fit.calibration import MIN_LABELS
from playbook.search.floor import default_min_relevance
from tests.playbook.fit.world import off_topic_world

MAINTAINER = {"Authorization": "Bearer maintainer-token"}
AGENT = {"Authorization": "Bearer agent-token-1"}
SCOPED = {"Authorization": "Bearer acme-token-1"}


@pytest.fixture
def client(shared_app: Any) -> Any:
    """A client of the module's app (its tests only send requests)."""
    tokens = {
        "api_token": "maintainer-token",
        "agent_tokens": "bot:agent-token-1,acme-bot@acme/api:acme-token-1",
    }
    return shared_app(**tokens).test_client()


def test_every_scope_and_the_off_topic_lessons(engine: Engine, client: Any) -> None:
    off_topic_world(engine)
    for headers in (MAINTAINER, AGENT):
        answer = client.get("/api/v1/relevance", headers=headers)
        assert answer.status_code == 200, answer.text
        assert answer.mimetype == "application/json"
        body = answer.get_json()
        assert body["floor"] == default_min_relevance() and body["min_labels"] == MIN_LABELS
        assert [s["scope"] for s in body["scopes"]] == ["CTMS", "acme/api", "other/web"]
        acme = body["scopes"][1]
        assert (acme["labels"], acme["helpful"], acme["used"], acme["fitted"]) == (17, 3, 16, False)
        assert acme["needed"] == MIN_LABELS - 16
        [pb6] = acme["off_topic"]
        assert (
            pb6["bullet_id"] == "pb-6" and pb6["last_reason"] == "about\nlog shipping, not builds"
        )
        assert [o["bullet_id"] for o in body["off_topic"]] == ["pb-1", "pb-4", "pb-6"]


def test_one_scope(engine: Engine, client: Any) -> None:
    off_topic_world(engine)
    body = client.get("/api/v1/relevance?scope=other/web", headers=MAINTAINER).get_json()
    assert [s["scope"] for s in body["scopes"]] == ["other/web"]
    assert [o["bullet_id"] for o in body["off_topic"]] == ["pb-4"]


def test_a_scoped_token_reads_only_its_scopes_verdicts(engine: Engine, client: Any) -> None:
    off_topic_world(engine)
    body = client.get("/api/v1/relevance", headers=SCOPED).get_json()
    assert [s["scope"] for s in body["scopes"]] == ["acme/api"]
    assert [o["bullet_id"] for o in body["off_topic"]] == ["pb-6"]
    assert client.get("/api/v1/relevance?scope=acme/api", headers=SCOPED).status_code == 200
    refused = client.get("/api/v1/relevance?scope=other/web", headers=SCOPED)
    assert refused.status_code == 403
    assert refused.mimetype == "application/problem+json"
    assert refused.get_json()["field"] == "scope"
    assert "other/web" not in refused.text and "pb-4" not in refused.text


def test_without_a_token_the_answer_is_401(client: Any) -> None:
    assert client.get("/api/v1/relevance").status_code == 401


@pytest.mark.parametrize(
    "query", ["scope=", "scope=%20", f"scope={'a' * 201}", "scope=a%00b", "floor=0.5"]
)
def test_bad_parameters_are_a_400_naming_the_field(client: Any, query: str) -> None:
    answer = client.get(f"/api/v1/relevance?{query}", headers=MAINTAINER)
    assert answer.status_code == 400, answer.text
    assert answer.mimetype == "application/problem+json"
    assert query.split("=", maxsplit=1)[0] in answer.text

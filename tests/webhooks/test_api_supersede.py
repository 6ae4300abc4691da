"""POST /api/v1/lessons/{id}/supersede, the pointers both ways, similar_to, cites of old lessons."""

from __future__ import annotations

import pytest
from sqlalchemy import Engine

from playbook.db import transaction
from playbook.lessons import lifecycle
from tests.support import saw

MAINTAINER = {"Authorization": "Bearer maintainer-token"}
AGENT = {"Authorization": "Bearer agent-token-1"}
OLD = "Pin the v1 payments client to 1.4 because 1.5 breaks refunds"
NEW = "Use the v2 payments client because it handles refunds and retries"
SIMILAR = "Pin the v2 payments client to 2.0 because 1.5 breaks refunds and retries"


@pytest.fixture
def make(shared_app):
    """A client of the app with a maintainer and an agent token, settings changed as asked
    (one app per module for each set of changes: the tests only send requests)."""

    def build(**changes):
        tokens = {"api_token": "maintainer-token", "agent_tokens": "claude:agent-token-1"}
        return shared_app(**(tokens | changes)).test_client()

    return build


@pytest.fixture
def pair(engine: Engine) -> tuple[str, str]:
    with transaction(engine) as session:
        old = lifecycle.add(session, OLD, learned_from="PAY-1", actor="t").bullet.id
        new = lifecycle.add(session, NEW, learned_from="PAY-2", actor="t").bullet.id
    return old, new


def problem(response, status: int, field: str | None = None) -> str:
    assert response.status_code == status, response.get_data(as_text=True)
    assert response.mimetype == "application/problem+json"
    body = response.get_json()
    if field is not None:
        assert body.get("field") == field, body
    return body["detail"]


def test_a_maintainer_supersedes_and_both_lessons_point_at_each_other(make, pair) -> None:
    api, (old, new) = make(), pair
    url = f"/api/v1/lessons/{old}/supersede"
    answer = api.post(url, json={"by": new, "reason": "v2 fixes refunds"}, headers=MAINTAINER)
    assert answer.status_code == 200, answer.text
    body = answer.get_json()
    assert body["changed"] is True
    assert (body["lesson"]["status"], body["lesson"]["superseded_by"]) == ("superseded", new)
    assert api.post(url, json={"by": new}, headers=MAINTAINER).get_json()["changed"] is False

    detail = api.get(f"/api/v1/lessons/{old}", headers=AGENT).get_json()
    assert detail["superseded_by"] == new and detail["revisions"][0]["action"] == "supersede"
    replacement = api.get(f"/api/v1/lessons/{new}", headers=AGENT).get_json()
    assert replacement["supersedes"] == [old]
    assert replacement["revisions"][0]["reason"] == f"supersedes {old}: v2 fixes refunds"
    found = api.get("/api/v1/search?q=payments+client+refunds", headers=AGENT).get_json()
    assert [hit["id"] for hit in found["lessons"]] == [new]
    listed = api.get("/api/v1/lessons?status=superseded", headers=AGENT).get_json()
    assert [lesson["id"] for lesson in listed["lessons"]] == [old]
    stats = api.get("/api/v1/stats", headers=AGENT).get_json()
    assert stats["bullets"]["by_status"] == {"active": 1, "superseded": 1}

    restored = api.post(f"/api/v1/lessons/{old}/restore", json={}, headers=MAINTAINER)
    assert restored.get_json()["lesson"]["superseded_by"] is None
    assert api.get(f"/api/v1/lessons/{new}", headers=AGENT).get_json()["supersedes"] == []


def test_agents_may_not_supersede_and_mistakes_are_problems(make, pair, engine: Engine) -> None:
    api, (old, new) = make(), pair
    url = f"/api/v1/lessons/{old}/supersede"
    assert "maintainer" in problem(api.post(url, json={"by": new}, headers=AGENT), 403)
    problem(api.post(url, json={}, headers=MAINTAINER), 400, "by")
    problem(api.post(url, json={"by": "pb 2"}, headers=MAINTAINER), 400, "by")
    problem(api.post(url, json={"by": new, "extra": 1}, headers=MAINTAINER), 400)
    problem(api.post(url, json={"by": new, "reason": 5}, headers=MAINTAINER), 400, "reason")
    # The lesson in the path exists: a replacement that does not is a conflict, not a 404.
    problem(api.post(url, json={"by": "pb-99"}, headers=MAINTAINER), 409, "by")
    missing = api.post("/api/v1/lessons/pb-99/supersede", json={"by": new}, headers=MAINTAINER)
    problem(missing, 404, "id")
    assert "itself" in problem(api.post(url, json={"by": old}, headers=MAINTAINER), 409)
    with transaction(engine) as session:
        third = lifecycle.add(session, "Log every refund", learned_from="PAY-3", actor="t")
        lifecycle.deprecate(session, third.bullet.id, reason="noise", actor="t")
    dead = api.post(url, json={"by": third.bullet.id}, headers=MAINTAINER)
    assert "active or proposed" in problem(dead, 409)
    assert api.post(url, json={"by": new}, headers=MAINTAINER).status_code == 200
    back = api.post(f"/api/v1/lessons/{new}/supersede", json={"by": old}, headers=MAINTAINER)
    assert "cycle" in problem(back, 409)
    with transaction(engine) as session:
        lifecycle.restore(session, third.bullet.id, actor="t")
    other = api.post(url, json={"by": third.bullet.id}, headers=MAINTAINER)
    assert f"already superseded by {new}" in problem(other, 409)
    with transaction(engine) as session:
        assert lifecycle.get(session, old).superseded_by == new


def test_the_route_is_documented(make) -> None:
    spec = make().get("/api/v1/openapi.json").get_json()
    route = spec["paths"]["/api/v1/lessons/{id}/supersede"]["post"]
    assert {"200", "403", "404", "409"} <= set(route["responses"])


def test_a_proposal_names_a_similar_lesson(make, pair) -> None:
    api, (old, _) = make(), pair
    similar = api.post(
        "/api/v1/lessons", json={"text": SIMILAR, "learned_from": "PAY-3"}, headers=AGENT
    )
    assert similar.status_code == 201
    assert similar.get_json()["similar_to"]["id"] == old
    assert 0.5 <= similar.get_json()["similar_to"]["overlap"] < 0.8
    other = api.post(
        "/api/v1/lessons",
        json={"text": "Vendor the chart lib", "learned_from": "W-1"},
        headers=AGENT,
    )
    assert other.status_code == 201 and other.get_json()["similar_to"] is None
    duplicate = api.post(
        "/api/v1/lessons", json={"text": OLD + " today", "learned_from": "PAY-4"}, headers=AGENT
    )
    assert duplicate.status_code == 200
    assert duplicate.get_json()["duplicate_of"] == old
    assert duplicate.get_json()["similar_to"] is None


@pytest.mark.parametrize("credit", [False, True])
def test_a_cite_of_a_superseded_lesson_counts_for_its_replacement_only_when_set(
    make, pair, engine: Engine, credit: bool
) -> None:
    api, (old, new) = make(superseded_cites_count_for_replacement=credit), pair
    saw(engine, "PAY-7")
    api.post(f"/api/v1/lessons/{old}/supersede", json={"by": new}, headers=MAINTAINER)
    cite = {"event": "cited", "lessonIds": [old], "ticketId": "PAY-7"}
    answer = api.post("/api/v1/usage", json=cite, headers=AGENT)
    assert answer.status_code == 201 and answer.get_json()["events"] == (2 if credit else 1)
    assert api.get(f"/api/v1/lessons/{old}", headers=AGENT).get_json()["cites"] == 1
    assert api.get(f"/api/v1/lessons/{new}", headers=AGENT).get_json()["cites"] == int(credit)

"""The documented agent API: lessons, search, proposals, maintainer actions, tokens and scopes."""

from __future__ import annotations

import pytest
from sqlalchemy import Engine

from playbook.db import transaction
from playbook.models import Revision
from playbook.outcomes import usage
from tests.support import saw
from webhooks import create_app

MAINTAINER = {"Authorization": "Bearer maintainer-token"}
AGENT = {"Authorization": "Bearer agent-token-1"}
SCOPED = {"Authorization": "Bearer scoped-token"}


@pytest.fixture
def api(shared_app):
    """A client of the app with a maintainer, an unscoped and a scoped agent token (one app
    for the module: its tests only send requests)."""
    app = shared_app(
        api_token="maintainer-token",
        agent_tokens="claude:agent-token-1, ci@acme/api:scoped-token",
    )
    return app.test_client()


def problem(response, status: int, field: str | None = None) -> dict:
    """The response is an RFC 9457 problem with ``status`` naming ``field``."""
    assert response.status_code == status, response.get_data(as_text=True)
    assert response.mimetype == "application/problem+json"
    body = response.get_json()
    assert body["status"] == status and body["title"] and body["detail"]
    if field is not None:
        assert body["field"] == field, body
    return body


def test_the_openapi_document_is_3_1_and_describes_every_route(api) -> None:
    spec = api.get("/api/v1/openapi.json").get_json()
    assert spec["openapi"].startswith("3.1")
    assert {
        "/api/v1/lessons",
        "/api/v1/lessons/{id}",
        "/api/v1/lessons/{id}/approve",
        "/api/v1/lessons/{id}/deprecate",
        "/api/v1/lessons/{id}/restore",
        "/api/v1/search",
        "/api/v1/stats",
        "/api/v1/usage",
        "/api/v1/bullets/{id}",
    } <= set(spec["paths"])
    assert spec["components"]["securitySchemes"]["bearer"]["scheme"] == "bearer"
    error = spec["paths"]["/api/v1/lessons/{id}"]["get"]["responses"]["404"]
    assert "application/problem+json" in error["content"]
    docs = api.get("/api/v1/docs", follow_redirects=True)
    assert docs.status_code == 200 and b"swagger" in docs.data.lower()
    # The docs page loads its scripts from this server, never from a CDN.
    assert b"https://" not in docs.data


def test_every_route_needs_a_token(api, seeded) -> None:
    for path in (
        "/api/v1/lessons",
        "/api/v1/lessons/pb-1",
        "/api/v1/search?q=retry",
        "/api/v1/stats",
    ):
        body = problem(api.get(path), 401, "Authorization")
        assert "Bearer" in body["detail"]
        assert api.get(path, headers={"Authorization": "Bearer wrong"}).status_code == 401


def test_lessons_are_listed_with_filters_and_cursor_pages(api, seeded) -> None:
    seen, cursor = [], None
    for _ in range(10):
        query = "limit=2" + (f"&cursor={cursor}" if cursor else "")
        page = api.get(f"/api/v1/lessons?{query}", headers=AGENT).get_json()
        seen += [lesson["id"] for lesson in page["lessons"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert sorted(seen) == ["pb-1", "pb-2", "pb-3", "pb-4", "pb-5"] and len(seen) == 5
    proposed = api.get("/api/v1/lessons?status=proposed", headers=AGENT).get_json()
    assert [lesson["id"] for lesson in proposed["lessons"]] == ["pb-5"]
    by_ticket = api.get("/api/v1/lessons?learned_from=CTMS-2", headers=AGENT).get_json()
    assert [lesson["id"] for lesson in by_ticket["lessons"]] == ["pb-2"]
    by_scope = api.get("/api/v1/lessons?scope=acme/api", headers=AGENT).get_json()
    assert [lesson["id"] for lesson in by_scope["lessons"]] == ["pb-3"]
    problem(api.get("/api/v1/lessons?status=gone", headers=AGENT), 400, "status")
    problem(api.get("/api/v1/lessons?limit=0", headers=AGENT), 400, "limit")


def test_a_lesson_comes_with_its_revisions_and_usage(api, seeded) -> None:
    saw(seeded, "CTMS-77")
    cite = {"event": "cited", "lessonIds": ["pb-1"], "ticketId": "CTMS-77"}
    assert api.post("/api/v1/usage", json=cite, headers=AGENT).status_code == 201
    lesson = api.get("/api/v1/lessons/pb-1", headers=AGENT).get_json()
    assert (lesson["id"], lesson["status"], lesson["cites"]) == ("pb-1", "active", 1)
    assert lesson["revisions"][0]["action"] == "create"
    assert lesson["events"][0] == lesson["events"][0] | {
        "kind": "cited",
        "ticket": "CTMS-77",
        "consumer": "agent:claude",
    }
    problem(api.get("/api/v1/lessons/pb-404", headers=AGENT), 404, "id")
    # The first version's route still answers in its own shape.
    old = api.get("/api/v1/bullets/pb-1", headers=AGENT).get_json()
    assert old["status"] == "ok" and old["bullet"]["cites"] == 1


def test_search_ranks_like_the_bot_and_records_loads_once_per_ticket(api, seeded) -> None:
    found = api.get("/api/v1/search?q=retry+webhooks&k=3", headers=AGENT).get_json()
    assert found["lessons"][0]["id"] == "pb-1" and found["loads_recorded"] == 0
    # A proposal is never offered to an agent's task.
    assert "pb-5" not in [hit["id"] for hit in found["lessons"]]
    saw(seeded, "CTMS-9")  # an agent's loads count for tickets the bot has seen
    whole = {"query": "Webhook retries\nDeliveries arrive twice; retry safely.", "ticket": "CTMS-9"}
    recorded = api.post("/api/v1/search", json=whole, headers=AGENT).get_json()
    assert recorded["ticket"] == "CTMS-9" and recorded["loads_recorded"] >= 1
    again = api.post("/api/v1/search", json=whole, headers=AGENT).get_json()
    assert again["lessons"] == recorded["lessons"]
    lesson = api.get("/api/v1/lessons/pb-1", headers=AGENT).get_json()
    assert lesson["loads"] == 1
    # The load is the agent's, as its token names it.
    assert (
        lesson["events"][0] | {"kind": "loaded", "consumer": "agent:claude"} == lesson["events"][0]
    )
    many = api.get("/api/v1/search?q=the+and+lock+index+chromium+retry&k=50", headers=AGENT)
    assert many.status_code == 200 and len(many.get_json()["lessons"]) <= 10
    problem(api.get("/api/v1/search?q=retry&k=0", headers=AGENT), 400, "k")
    problem(api.get("/api/v1/search?q=%20%20", headers=AGENT), 400, "q")
    problem(api.post("/api/v1/search", json={"query": "x", "k": True}, headers=AGENT), 400, "k")


def test_search_answers_carry_relevance_and_min_relevance_leaves_out_the_weak(api, seeded) -> None:
    found = api.get("/api/v1/search?q=retry+webhooks+idempotency&k=5", headers=AGENT).get_json()
    first = found["lessons"][0]
    assert first["id"] == "pb-1" and 0 < first["relevance"] < 1
    assert first["fit"] in ("strong", "possible") and "webhooks" in first["matched"]
    assert all(hit["relevance"] <= first["relevance"] for hit in found["lessons"])
    # The agent asked: no floor unless it passes one, and then only what reaches it.
    floor = first["relevance"] - 0.0001  # the answer rounds to 4 places
    kept = api.get(
        f"/api/v1/search?q=retry+webhooks+idempotency&min_relevance={floor}", headers=AGENT
    )
    assert [hit["id"] for hit in kept.get_json()["lessons"]] == ["pb-1"]
    body = {"query": "Retry webhooks\nwith an idempotency key", "min_relevance": 1}
    assert api.post("/api/v1/search", json=body, headers=AGENT).get_json()["lessons"] == []
    problem(
        api.get("/api/v1/search?q=retry&min_relevance=1.5", headers=AGENT), 400, "min_relevance"
    )
    problem(
        api.get("/api/v1/search?q=retry&min_relevance=abc", headers=AGENT), 400, "min_relevance"
    )
    for bad in (True, "0.5", -0.1, 2):
        bad_body = {"query": "retry", "min_relevance": bad}
        problem(api.post("/api/v1/search", json=bad_body, headers=AGENT), 400, "min_relevance")


def test_an_agent_proposes_and_only_a_maintainer_approves(api, seeded, engine) -> None:
    text = {"text": "Close the HTTP client after each test", "learned_from": "CTMS-12"}
    made = api.post("/api/v1/lessons", json=text, headers=AGENT)
    assert made.status_code == 201
    body = made.get_json()
    assert body["created"] is True and body["lesson"]["status"] == "proposed"
    new_id = body["lesson"]["id"]
    duplicate = api.post("/api/v1/lessons", json=text, headers=AGENT)
    assert duplicate.status_code == 200
    assert duplicate.get_json() | {"created": False, "duplicate_of": new_id} == duplicate.get_json()
    body = problem(api.post(f"/api/v1/lessons/{new_id}/approve", json={}, headers=AGENT), 403)
    assert "maintainer" in body["detail"]
    problem(
        api.post(f"/api/v1/lessons/{new_id}/deprecate", json={"reason": "x"}, headers=AGENT), 403
    )
    approved = api.post(
        f"/api/v1/lessons/{new_id}/approve", json={"reason": "useful"}, headers=MAINTAINER
    ).get_json()
    assert approved["changed"] is True and approved["lesson"]["status"] == "active"
    with transaction(engine) as session:
        actors = [
            (r.action, r.actor)
            for r in session.query(Revision)
            .filter(Revision.bullet_id == new_id)
            .order_by(Revision.id)
        ]
    assert actors == [("create", "agent:claude"), ("approve", "api:maintainer")]


def test_a_maintainer_deprecates_with_a_reason_and_restores(api, seeded) -> None:
    problem(api.post("/api/v1/lessons/pb-2/deprecate", json={}, headers=MAINTAINER), 400, "reason")
    gone = api.post(
        "/api/v1/lessons/pb-2/deprecate",
        json={"reason": "wrong for async code"},
        headers=MAINTAINER,
    ).get_json()
    assert gone["lesson"]["status"] == "deprecated"
    assert gone["lesson"]["demoted_reason"] == "wrong for async code"
    back = api.post("/api/v1/lessons/pb-2/restore", json={}, headers=MAINTAINER).get_json()
    assert back["lesson"]["status"] == "active" and back["lesson"]["demoted_reason"] is None
    # A proposal is approved, not restored: the conflict is named.
    problem(api.post("/api/v1/lessons/pb-5/restore", json={}, headers=MAINTAINER), 409)
    problem(api.post("/api/v1/lessons/pb-404/approve", json={}, headers=MAINTAINER), 404, "id")


def test_a_scoped_token_sees_and_proposes_only_in_its_scope(api, seeded) -> None:
    listed = api.get("/api/v1/lessons", headers=SCOPED).get_json()
    assert {lesson["scope"] for lesson in listed["lessons"]} == {"global", "acme/api"}
    problem(api.get("/api/v1/lessons/pb-4", headers=SCOPED), 404)
    query = "/api/v1/search?q=chart+library+stats+page"
    assert "pb-4" in [hit["id"] for hit in api.get(query, headers=AGENT).get_json()["lessons"]]
    found = api.get(query, headers=SCOPED).get_json()
    assert "pb-4" not in [hit["id"] for hit in found["lessons"]]
    cite = {"event": "cited", "lessonIds": ["pb-4"], "ticketId": "acme/api#1"}
    problem(api.post("/api/v1/usage", json=cite, headers=SCOPED), 404)
    made = api.post(
        "/api/v1/lessons",
        json={"text": "Run migrations before the web container", "learned_from": "acme/api#4"},
        headers=SCOPED,
    ).get_json()
    assert made["lesson"]["scope"] == "acme/api"
    forged = {"text": "Another lesson entirely", "learned_from": "x#1", "scope": "other/web"}
    problem(api.post("/api/v1/lessons", json=forged, headers=SCOPED), 403)


def test_bad_bodies_are_problems_naming_the_field(api, seeded) -> None:
    problem(
        api.post("/api/v1/lessons", data="text=hi", headers=AGENT, content_type="text/plain"),
        415,
        "Content-Type",
    )
    problem(
        api.post(
            "/api/v1/lessons", data=b"{not json", headers=AGENT, content_type="application/json"
        ),
        400,
    )
    problem(
        api.post(
            "/api/v1/lessons", json={"text": "x" * 3000, "learned_from": "C-1"}, headers=AGENT
        ),
        400,
        "text",
    )
    problem(
        api.post("/api/v1/lessons", json={"text": "A real lesson"}, headers=AGENT),
        400,
        "learned_from",
    )
    problem(
        api.post("/api/v1/lessons", json={"text": "   ", "learned_from": "C-1"}, headers=AGENT),
        400,
        "text",
    )
    not_allowed = api.put("/api/v1/lessons", headers=AGENT)
    assert not_allowed.status_code == 405 and "GET" in not_allowed.headers["Allow"]


def test_stats_report_the_loop(api, seeded) -> None:
    with transaction(seeded) as session:
        # A merged PR cited pb-1: an agent's own report may then rate it once too.
        usage.record(session, "cited", ["pb-1"], ticket_key="CTMS-2", pr_key="a/b#1", success=True)
    saw(seeded, "CTMS-3")
    cite = {"event": "cited", "lessonIds": ["pb-1"], "ticketId": "CTMS-3", "phaseSuccess": True}
    api.post("/api/v1/usage", json=cite, headers=AGENT)
    stats = api.get("/api/v1/stats", headers=AGENT).get_json()
    assert stats["bullets"]["by_status"] == {"active": 4, "proposed": 1}
    assert stats["usage"]["cites"] == 2 and stats["usage"]["successes"] == 2


def test_the_api_is_off_without_any_token(engine: Engine, settings) -> None:
    off = create_app(
        settings.model_copy(update={"api_token": None, "agent_tokens": ""}), engine=engine
    ).test_client()
    body = problem(off.get("/api/v1/lessons", headers=AGENT), 503)
    assert "PLAYBOOK_AGENT_TOKENS" in body["detail"]


def test_agent_tokens_name_the_agent_and_its_scope() -> None:
    from bot import callers
    from bot.config import Settings

    settings = Settings(
        PLAYBOOK_AGENT_TOKENS="plain-token, claude:tok-a, ci@acme/api:tok-b",
        PLAYBOOK_AGENT_SCOPE="CTMS",
        _env_file=None,
    )

    def who(token: str) -> tuple[str, str | None] | None:
        caller = callers.from_authorization(settings, f"Bearer {token}")
        return None if caller is None else (caller.actor, caller.scope)

    assert who("tok-a") == ("agent:claude", "CTMS")
    assert who("tok-b") == ("agent:ci", "acme/api")
    # An entry sent whole still works, for tokens that hold a colon themselves.
    assert who("claude:tok-a") == ("agent:claude", "CTMS")
    assert who("plain-token")[0].startswith("agent:agent-")
    assert who("claude") is None and who("tok") is None
    assert {"tok-a", "tok-b", "plain-token"} <= set(settings.secret_values())

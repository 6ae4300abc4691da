"""The agent API: bearer auth, reading bullets, reporting loads and cites."""

from __future__ import annotations

import pytest
from sqlalchemy import Engine

from bot.config import Settings
from playbook.db import transaction
from playbook.lessons import lifecycle
from tests.support import saw
from webhooks import create_app

AUTH = {"Authorization": "Bearer agent-token"}


@pytest.fixture
def app(shared_app):
    """One app for the module: its tests only send requests (the database is emptied for each)."""
    return shared_app()


def bullet(engine: Engine, bullet_id: str):
    with transaction(engine) as session:
        return lifecycle.get(session, bullet_id)


def test_get_bullet(client, seeded) -> None:
    response = client.get("/api/v1/bullets/pb-1", headers=AUTH)
    assert response.status_code == 200
    data = response.get_json()["bullet"]
    assert (data["id"], data["learned_from"], data["loads"]) == ("pb-1", "CTMS-1", 0)
    missing = client.get("/api/v1/bullets/pb-9", headers=AUTH)
    assert missing.status_code == 404 and "pb-9" in missing.get_json()["message"]


@pytest.mark.parametrize(
    "headers", [{}, {"Authorization": "Bearer nope"}, {"Authorization": "agent-token"}]
)
def test_requests_without_the_token_are_401(client, seeded, headers) -> None:
    response = client.get("/api/v1/bullets/pb-1", headers=headers)
    assert response.status_code == 401
    assert "PLAYBOOK_API_TOKEN" in response.get_json()["message"]


def test_api_is_off_without_a_token(engine: Engine, settings: Settings) -> None:
    client = create_app(
        settings.model_copy(update={"api_token": None}), engine=engine
    ).test_client()
    response = client.get("/api/v1/bullets/pb-1", headers=AUTH)
    assert response.status_code == 503
    assert "PLAYBOOK_API_TOKEN" in response.get_json()["message"]


def test_post_one_event_and_a_list(client, seeded) -> None:
    saw(seeded, "CTMS-9")
    one = {"event": "loaded", "lessonIds": ["pb-1", "pb-2"], "ticketId": "CTMS-9", "phase": "plan"}
    response = client.post("/api/v1/usage", json=one, headers=AUTH)
    assert response.status_code == 201
    assert response.get_json() == {
        "status": "recorded",
        "events": 2,
        "counted": 2,
        "rated": 0,
        "discounted": {},
    }
    many = [
        {"event": "cited", "lessonIds": ["pb-1"], "ticketId": "CTMS-9", "phaseSuccess": True},
        {
            "event": "cited",
            "lessonId": "pb-2",
            "ticketId": "CTMS-9",
            "phaseSuccess": False,
            "ts": 1793610891301,
            "consumer": "claude-code",
        },
    ]
    answer = client.post("/api/v1/usage", json=many, headers=AUTH)
    assert answer.status_code == 201
    # No PR ever rated these lessons: the outcomes reported are kept, not counted.
    assert answer.get_json()["discounted"] == {"needs_pr_evidence": 2}
    first, second = bullet(seeded, "pb-1"), bullet(seeded, "pb-2")
    assert (first.loads, first.cites, first.cites_success) == (1, 1, 0)
    assert (second.loads, second.cites, second.cites_failure) == (1, 1, 0)


@pytest.mark.parametrize(
    ("body", "status", "message"),
    [
        ({"event": "viewed", "lessonIds": ["pb-1"]}, 400, "event 1: event must be one of"),
        ({"event": "cited", "lessonIds": []}, 400, "lessonIds"),
        (
            [
                {"event": "cited", "lessonIds": ["pb-1"], "ticketId": "CTMS-9"},
                {"event": "cited", "lessonIds": ["pb-404"], "ticketId": "CTMS-9"},
            ],
            404,
            "event 2: no bullet",
        ),
        ({"event": "cited", "lessonIds": ["pb-1"]}, 400, "event 1: ticketId is required"),
        (
            [
                {"event": "loaded", "lessonIds": ["pb-1"], "ticketId": "CTMS-9"},
                {"event": "loaded", "lessonIds": ["pb-1"], "ticketId": "  "},
            ],
            400,
            "event 2: ticketId is required",
        ),
        (
            {"event": "cited", "lessonIds": ["pb-1"], "ticketId": None, "ticket": None},
            400,
            "ticketId is required",
        ),
        ({"event": "cited", "lessonIds": ["pb-1"], "ts": "yesterday"}, 400, "ts"),
        ({"event": "cited", "lessonIds": ["pb-1"], "phaseSuccess": "yes"}, 400, "phaseSuccess"),
        ([], 400, "no events"),
    ],
)
def test_bad_events_are_rejected_whole(client, seeded, body, status, message) -> None:
    response = client.post("/api/v1/usage", json=body, headers=AUTH)
    assert response.status_code == status
    assert message in response.get_json()["message"]
    assert (bullet(seeded, "pb-1").cites, bullet(seeded, "pb-1").loads) == (0, 0)


def test_malformed_json_is_400(client, seeded) -> None:
    response = client.post(
        "/api/v1/usage", data=b"{not json", headers=AUTH, content_type="application/json"
    )
    assert response.status_code == 400


def test_a_lesson_counts_once_per_ticket_and_kind_however_often_it_is_reported(
    client, seeded
) -> None:
    saw(seeded, "CTMS-9", "CTMS-10")
    shown = {"event": "loaded", "lessonIds": ["pb-1", "pb-2"], "ticketId": "CTMS-9"}
    cited = {"event": "cited", "lessonIds": ["pb-1"], "ticketId": "CTMS-9"}
    answers = [
        client.post("/api/v1/usage", json=body, headers=AUTH).get_json()["events"]
        for body in (shown, shown, cited, [cited, cited], cited | {"phaseSuccess": True})
    ]
    assert answers == [2, 0, 1, 0, 0]
    first = bullet(seeded, "pb-1")
    # The last report brought an outcome for the cite already counted; with no PR evidence
    # about pb-1 it is kept as a claim, not a rating.
    assert (first.loads, first.cites, first.cites_success) == (1, 1, 0)
    other = {"event": "cited", "lessonIds": ["pb-1"], "ticketId": "CTMS-10"}
    assert client.post("/api/v1/usage", json=other, headers=AUTH).get_json()["events"] == 1
    assert bullet(seeded, "pb-1").cites == 2


def test_idempotency_key_makes_a_resend_harmless(client, seeded) -> None:
    saw(seeded, "CTMS-9")
    body = {"event": "cited", "lessonIds": ["pb-1"], "ticketId": "CTMS-9", "phaseSuccess": True}
    headers = AUTH | {"Idempotency-Key": "run-42"}
    for _ in range(2):
        assert client.post("/api/v1/usage", json=body, headers=headers).status_code == 201
    assert bullet(seeded, "pb-1").cites == 1

"""/api/v1/consolidations: maintainers list, read, accept (edited), reject and undo merges."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import Engine

from playbook.db import transaction
from playbook.models import Bullet
from tests.webhooks.consolidating import open_consolidation
from webhooks import create_app

MAINTAINER, AGENT = "consolidations-maintainer", "consolidations-agent"
BOSS = {"Authorization": f"Bearer {MAINTAINER}"}
BOT = {"Authorization": f"Bearer {AGENT}"}
TEXTS = (
    "Retry the upload with an idempotency key when the storage API times out",
    "Storage calls that hang need a second attempt; reuse the same key each time",
)


@pytest.fixture
def client(shared_app: Any) -> Any:
    """A client of the module's app (its tests only send requests)."""
    return shared_app(api_token=MAINTAINER, agent_tokens=f"ci:{AGENT}").test_client()


@pytest.fixture
def proposal(engine: Engine) -> tuple[int, list[str]]:
    return open_consolidation(engine, TEXTS)


def _lesson(engine: Engine, bullet_id: str) -> tuple[str, str, str | None]:
    with transaction(engine) as session:
        bullet = session.get(Bullet, bullet_id)
        assert bullet is not None
        return bullet.status, bullet.text, bullet.superseded_by


def test_a_maintainer_lists_and_reads_the_proposal_with_its_members(
    client: Any, proposal: tuple[int, list[str]]
) -> None:
    number, members = proposal
    answer = client.get("/api/v1/consolidations", headers=BOSS)
    assert answer.status_code == 200, answer.text
    body = answer.get_json()
    assert body["count"] == 1
    [listed] = body["consolidations"]
    assert listed["id"] == number and listed["status"] == "open"
    assert listed["member_ids"] == members
    assert [m["text"] for m in listed["members"]] == list(TEXTS)
    assert listed["saves_chars"] > 0 and listed["merged_id"] is None
    assert listed["draft_source"] == "longest" and listed["draft"] in TEXTS
    one = client.get(f"/api/v1/consolidations/{number}", headers=BOSS)
    assert one.status_code == 200 and one.get_json()["id"] == number
    # Filters: another status or scope finds nothing.
    for query in ("status=accepted", "scope=acme/api"):
        found = client.get(f"/api/v1/consolidations?{query}", headers=BOSS).get_json()
        assert found["count"] == 0, query
    found = client.get("/api/v1/consolidations?status=open&scope=global", headers=BOSS)
    assert found.get_json()["count"] == 1
    bad = client.get("/api/v1/consolidations?status=maybe", headers=BOSS)
    assert bad.status_code == 400 and bad.get_json()["field"] == "status"


def test_an_agent_token_may_neither_read_nor_decide(
    client: Any, proposal: tuple[int, list[str]], engine: Engine
) -> None:
    number, members = proposal
    for method, path in (
        ("get", "/api/v1/consolidations"),
        ("get", f"/api/v1/consolidations/{number}"),
        ("post", f"/api/v1/consolidations/{number}/accept"),
        ("post", f"/api/v1/consolidations/{number}/reject"),
        ("post", f"/api/v1/consolidations/{number}/undo"),
    ):
        answer = getattr(client, method)(path, headers=BOT, json={} if method == "post" else None)
        assert answer.status_code == 403, (path, answer.text)
        assert "only a maintainer" in answer.get_json()["detail"]
        assert TEXTS[0] not in answer.text
        assert getattr(client, method)(path).status_code == 401
    assert [_lesson(engine, m)[0] for m in members] == ["active", "active"]


def test_accept_with_an_edited_text_merges_and_undo_takes_it_back(
    client: Any, proposal: tuple[int, list[str]], engine: Engine
) -> None:
    number, members = proposal
    merged_text = "Retry storage uploads that time out, always with an idempotency key"
    answer = client.post(
        f"/api/v1/consolidations/{number}/accept",
        headers=BOSS,
        json={"text": merged_text, "reason": "one lesson says it"},
    )
    assert answer.status_code == 200, answer.text
    body = answer.get_json()
    assert body["status"] == "accepted" and body["decided_by"] == "api:maintainer"
    assert body["reason"] == "one lesson says it" and body["draft_source"] == "edited"
    merged = body["merged_id"]
    assert merged and merged not in members
    assert _lesson(engine, merged) == ("active", merged_text, None)
    assert [_lesson(engine, m)[0] for m in members] == ["superseded", "superseded"]
    assert [_lesson(engine, m)[2] for m in members] == [merged, merged]

    again = client.post(f"/api/v1/consolidations/{number}/accept", headers=BOSS, json={})
    assert again.status_code == 409 and "accepted" in again.get_json()["detail"]
    assert (
        client.post(f"/api/v1/consolidations/{number}/reject", headers=BOSS, json={}).status_code
        == 409
    )

    undone = client.post(
        f"/api/v1/consolidations/{number}/undo", headers=BOSS, json={"reason": "too broad"}
    )
    assert undone.status_code == 200, undone.text
    assert undone.get_json()["status"] == "undone"
    assert [_lesson(engine, m)[0] for m in members] == ["active", "active"]
    assert _lesson(engine, merged)[0] == "archived"
    twice = client.post(f"/api/v1/consolidations/{number}/undo", headers=BOSS, json={})
    assert twice.status_code == 409 and "undone" in twice.get_json()["detail"]


def test_accept_without_a_text_takes_the_draft(
    client: Any, proposal: tuple[int, list[str]], engine: Engine
) -> None:
    number, _ = proposal
    draft = client.get(f"/api/v1/consolidations/{number}", headers=BOSS).get_json()["draft"]
    answer = client.post(f"/api/v1/consolidations/{number}/accept", headers=BOSS, json={})
    assert answer.status_code == 200, answer.text
    assert _lesson(engine, answer.get_json()["merged_id"])[1] == draft


def test_reject_keeps_the_lessons_and_closes_the_proposal(
    client: Any, proposal: tuple[int, list[str]], engine: Engine
) -> None:
    number, members = proposal
    answer = client.post(
        f"/api/v1/consolidations/{number}/reject", headers=BOSS, json={"reason": "distinct"}
    )
    assert answer.status_code == 200, answer.text
    body = answer.get_json()
    assert (body["status"], body["reason"], body["merged_id"]) == ("rejected", "distinct", None)
    assert [_lesson(engine, m)[0] for m in members] == ["active", "active"]
    late = client.post(f"/api/v1/consolidations/{number}/accept", headers=BOSS, json={})
    assert late.status_code == 409 and "rejected" in late.get_json()["detail"]
    assert (
        client.post(f"/api/v1/consolidations/{number}/undo", headers=BOSS, json={}).status_code
        == 409
    )


def test_unknown_ids_are_404_naming_the_id_and_bad_ids_400(client: Any) -> None:
    for method, path in (
        ("get", "/api/v1/consolidations/987654"),
        ("post", "/api/v1/consolidations/987654/accept"),
        ("post", "/api/v1/consolidations/987654/undo"),
    ):
        answer = getattr(client, method)(path, headers=BOSS, json={} if method == "post" else None)
        assert answer.status_code == 404, answer.text
        problem = answer.get_json()
        assert "987654" in problem["detail"] and problem["field"] == "id"
    for bad in ("abc", "0", "-3", "99999999999999999999999"):
        answer = client.get(f"/api/v1/consolidations/{bad}", headers=BOSS)
        assert answer.status_code == 400, (bad, answer.text)
        assert answer.get_json()["field"] == "id"


@pytest.mark.parametrize(
    ("body", "field", "words"),
    [
        ({"text": "x" * 2001}, "text", "at most 2000 characters"),
        ({"text": "   "}, "text", "pattern"),
        ({"text": ""}, "text", "at least 1"),
        ({"text": "Use the key ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"}, "text", "GitHub"),
        ({"text": 5}, "text", "string"),
        ({"merged": "x"}, "merged", "Extra"),
        ({"reason": "x" * 2001}, "reason", "at most"),
    ],
)
def test_a_bad_accept_body_is_400_naming_the_field_and_changes_nothing(
    client: Any,
    proposal: tuple[int, list[str]],
    engine: Engine,
    body: dict[str, Any],
    field: str,
    words: str,
) -> None:
    number, members = proposal
    answer = client.post(f"/api/v1/consolidations/{number}/accept", headers=BOSS, json=body)
    assert answer.status_code == 400, answer.text
    problem = answer.get_json()
    assert problem["field"] == field and words in problem["detail"], problem
    assert "a1B2c3D4e5F6" not in answer.text
    assert [_lesson(engine, m)[0] for m in members] == ["active", "active"]
    listed = client.get(f"/api/v1/consolidations/{number}", headers=BOSS).get_json()
    assert listed["status"] == "open"


def test_a_shorter_lesson_limit_applies_to_the_merged_text(
    engine: Engine, settings: Any, proposal: tuple[int, list[str]]
) -> None:
    number, _ = proposal
    tokens = {"api_token": MAINTAINER, "max_lesson_chars": 40}
    client = create_app(settings.model_copy(update=tokens), engine=engine).test_client()
    answer = client.post(
        f"/api/v1/consolidations/{number}/accept", headers=BOSS, json={"text": "y" * 41}
    )
    assert answer.status_code == 400 and answer.get_json()["field"] == "text"
    assert "PLAYBOOK_MAX_LESSON_CHARS" in answer.get_json()["detail"]

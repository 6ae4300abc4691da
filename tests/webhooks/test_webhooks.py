"""The webhook endpoints: verification, validation, dedup, and answers that are always JSON."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import Engine, func, select

from bot.config import Settings
from playbook import clock
from playbook.db import transaction
from playbook.deliveries import heartbeats
from playbook.models import Delivery
from tests.payloads import fixture_body
from tests.support import GITHUB_SECRET, JIRA_SECRET
from webhooks import create_app
from webhooks.signatures import sign

T0 = datetime(2026, 11, 3, 9, 0, tzinfo=UTC)


@pytest.fixture
def app(shared_app):
    """One app for the module: its tests only send requests (the database is emptied for each)."""
    return shared_app()


def rows(engine: Engine) -> list[Delivery]:
    with transaction(engine) as session:
        return list(session.scalars(select(Delivery).order_by(Delivery.id)))


def test_githubs_own_signature_vector() -> None:
    expected = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"
    assert sign(GITHUB_SECRET, b"Hello, World!") == expected


def test_signed_delivery_is_stored_and_acknowledged(deliver, engine: Engine) -> None:
    response = deliver("issues.opened", delivery="d-1", installation={"id": 42})
    assert response.status_code == 202
    assert response.get_json() == {"status": "accepted", "delivery": "d-1"}
    [row] = rows(engine)
    assert (row.source, row.event, row.action, row.delivery_id) == (
        "github",
        "issues",
        "opened",
        "d-1",
    )
    assert row.status == "pending" and row.attempts == 0
    assert row.installation_id == 42
    assert row.headers["X-GitHub-Event"] == "issues"
    stored = json.loads(fixture_body("issues.opened"))
    assert json.loads(row.payload)["issue"]["number"] == stored["issue"]["number"]
    # The ticket it is about, told once here: the worker's lanes and /ui read it.
    assert row.ticket_key == f"{stored['repository']['full_name']}#{stored['issue']['number']}"


def test_redelivery_is_a_duplicate(deliver, engine: Engine) -> None:
    assert deliver("pull_request.opened", delivery="same").status_code == 202
    again = deliver("pull_request.opened", delivery="same")
    assert again.status_code == 200
    assert again.get_json()["status"] == "duplicate"
    assert len(rows(engine)) == 1


def test_redelivering_a_dead_delivery_queues_it_again(deliver, engine: Engine) -> None:
    # After the cause is fixed, GitHub's "Redeliver" (same id, same body) runs it again.
    assert deliver("pull_request.opened", delivery="dead-1").status_code == 202
    with transaction(engine) as session:
        row = session.scalar(select(Delivery).where(Delivery.delivery_id == "dead-1"))
        row.status, row.attempts, row.last_error = "dead", 5, "GitHub answered 403"
    again = deliver("pull_request.opened", delivery="dead-1")
    assert (again.status_code, again.get_json()["status"]) == (202, "requeued")
    [row] = rows(engine)
    assert (row.status, row.attempts) == ("pending", 0)
    # Queued again, not dead any more: a second redelivery is a duplicate.
    assert deliver("pull_request.opened", delivery="dead-1").get_json()["status"] == "duplicate"


def test_a_dead_delivery_sent_with_another_body_stays_dead(deliver, engine: Engine) -> None:
    assert deliver("pull_request.opened", delivery="dead-2").status_code == 202
    with transaction(engine) as session:
        row = session.scalar(select(Delivery).where(Delivery.delivery_id == "dead-2"))
        row.status = "dead"
    other = deliver("pull_request.closed", delivery="dead-2")
    assert (other.status_code, other.get_json()["status"]) == (200, "duplicate")
    assert [row.status for row in rows(engine)] == ["dead"]


def test_ping_is_answered_and_not_stored(deliver, engine: Engine) -> None:
    response = deliver("ping")
    assert response.status_code == 200
    assert response.get_json()["status"] == "pong"
    assert rows(engine) == []


def test_unknown_event_is_stored_for_the_worker(deliver, engine: Engine) -> None:
    body = json.dumps({"action": "created", "thing": {"id": 1}}).encode()
    response = deliver("sponsorship.created", body=body)
    assert response.status_code == 202
    assert rows(engine)[0].event == "sponsorship"


@pytest.mark.parametrize(
    ("mutate", "status", "message"),
    [
        (lambda h, b: h.pop("X-Hub-Signature-256"), 401, "missing X-Hub-Signature-256"),
        (
            lambda h, b: h.update({"X-Hub-Signature-256": "sha256=" + "0" * 64}),
            401,
            "does not match",
        ),
        (lambda h, b: h.update({"X-Hub-Signature-256": sign("wrong", b)}), 401, "does not match"),
        (lambda h, b: h.update({"X-Hub-Signature-256": "md5=abc"}), 401, "does not match"),
        (lambda h, b: h.pop("X-GitHub-Event"), 400, "X-GitHub-Event"),
        (lambda h, b: h.pop("X-GitHub-Delivery"), 400, "X-GitHub-Delivery"),
        (
            lambda h, b: h.update({"Content-Type": "application/x-www-form-urlencoded"}),
            415,
            "application/json",
        ),
    ],
)
def test_bad_requests_are_refused_with_a_reason(client, engine, mutate, status, message) -> None:
    body = fixture_body("issues.opened")
    headers = {
        "X-GitHub-Event": "issues",
        "X-GitHub-Delivery": str(uuid.uuid4()),
        "X-Hub-Signature-256": sign(GITHUB_SECRET, body),
        "Content-Type": "application/json",
    }
    mutate(headers, body)
    response = client.post("/webhooks/github", data=body, headers=headers)
    assert response.status_code == status
    assert response.get_json()["status"] == "error"
    assert message in response.get_json()["message"]
    assert rows(engine) == []


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b'{"action": "opened", "issue": {"number": 1', "not valid JSON"),
        (b"[1, 2, 3]", "JSON object"),
        (b"\xff\xfe\x00garbage", "must be UTF-8"),
        (b"", "not valid JSON"),
    ],
)
def test_malformed_bodies_are_400(deliver, engine, body: bytes, message: str) -> None:
    response = deliver("issues.opened", body=body)
    assert response.status_code == 400
    assert message in response.get_json()["message"]
    assert rows(engine) == []


def test_oversize_body_is_413(engine: Engine, settings: Settings) -> None:
    small = settings.model_copy(update={"max_body_bytes": 1024})
    client = create_app(small, engine=engine).test_client()
    body = fixture_body("issues.opened")
    assert len(body) > 1024
    response = client.post(
        "/webhooks/github",
        data=body,
        headers={
            "X-GitHub-Event": "issues",
            "X-GitHub-Delivery": "big",
            "X-Hub-Signature-256": sign(GITHUB_SECRET, body),
        },
        content_type="application/json",
    )
    assert response.status_code == 413
    assert response.get_json()["status"] == "error"


def test_without_a_secret_github_deliveries_are_refused(engine: Engine, settings: Settings) -> None:
    unset = settings.model_copy(update={"github_webhook_secret": None})
    client = create_app(unset, engine=engine).test_client()
    response = client.post(
        "/webhooks/github",
        data=b"{}",
        headers={"X-GitHub-Event": "issues", "X-GitHub-Delivery": "x"},
        content_type="application/json",
    )
    assert response.status_code == 503
    assert "GITHUB_WEBHOOK_SECRET" in response.get_json()["message"]


def test_insecure_mode_accepts_unsigned_deliveries_and_says_so_loudly(
    engine: Engine, settings: Settings, caplog: pytest.LogCaptureFixture
) -> None:
    unset = settings.model_copy(
        update={"github_webhook_secret": None, "insecure_skip_verify": True}
    )
    client = create_app(unset, engine=engine).test_client()
    assert "INSECURE" in caplog.text
    response = client.post(
        "/webhooks/github",
        data=fixture_body("issues.opened"),
        headers={"X-GitHub-Event": "issues", "X-GitHub-Delivery": "dev-1"},
        content_type="application/json",
    )
    assert response.status_code == 202


def test_database_down_answers_503_so_the_sender_retries(settings: Settings, tmp_path) -> None:
    down = settings.model_copy(
        update={"database_url": "postgresql+psycopg://nobody@127.0.0.1:1/none"}
    )
    client = create_app(down).test_client()
    body = fixture_body("issues.opened")
    response = client.post(
        "/webhooks/github",
        data=body,
        headers={
            "X-GitHub-Event": "issues",
            "X-GitHub-Delivery": "d",
            "X-Hub-Signature-256": sign(GITHUB_SECRET, body),
        },
        content_type="application/json",
    )
    assert response.status_code == 503
    assert "retry" in response.get_json()["message"]
    assert client.get("/readyz").status_code == 503
    assert client.get("/healthz").status_code == 200


def test_readyz_wants_a_fresh_worker_heartbeat(client, engine: Engine, settings) -> None:
    assert client.get("/healthz").get_json()["status"] == "ok"
    idle = client.get("/readyz")
    assert idle.status_code == 503
    assert "no worker" in idle.get_json()["message"] and idle.get_json()["database"] == "ok"
    with clock.frozen(T0):
        heartbeats.beat(engine, "w1", T0)
    with clock.frozen(T0 + timedelta(seconds=settings.worker_heartbeat_timeout - 1)):
        ready = client.get("/readyz")
        assert ready.status_code == 200
        assert ready.get_json()["status"] == "ok" and ready.get_json()["workers"] == 1
    with clock.frozen(T0 + timedelta(seconds=settings.worker_heartbeat_timeout + 1)):
        stale = client.get("/readyz")
        assert stale.status_code == 503 and stale.get_json()["workers"] == 0


def test_unknown_paths_and_methods_answer_json(client) -> None:
    missing = client.get("/nope")
    assert missing.status_code == 404 and missing.get_json()["status"] == "error"
    wrong = client.get("/webhooks/github")
    assert wrong.status_code == 405 and wrong.get_json()["status"] == "error"


# --- Jira ---------------------------------------------------------------------------------


def post_jira(client, body: bytes, *, signed: bool = True, **headers: str):
    if signed:
        headers.setdefault("X-Hub-Signature", sign(JIRA_SECRET, body))
    return client.post(
        "/webhooks/jira", data=body, headers=headers, content_type="application/json"
    )


def test_signed_jira_delivery_is_stored(client, engine: Engine) -> None:
    body = fixture_body("jira.issue_created")
    response = post_jira(client, body, **{"X-Atlassian-Webhook-Identifier": "jira-1"})
    assert response.status_code == 202
    [row] = rows(engine)
    assert (row.source, row.event, row.action, row.delivery_id) == (
        "jira",
        "jira:issue_created",
        "issue_created",
        "jira-1",
    )
    assert row.ticket_key == json.loads(body)["issue"]["key"]


def test_jira_retry_with_same_identifier_is_a_duplicate(client, engine: Engine) -> None:
    body = fixture_body("jira.issue_updated")
    headers = {"X-Atlassian-Webhook-Identifier": "jira-7"}
    assert post_jira(client, body, **headers).status_code == 202
    retry = post_jira(client, body, **headers, **{"X-Atlassian-Webhook-Retry": "1"})
    assert retry.status_code == 200 and retry.get_json()["status"] == "duplicate"
    assert len(rows(engine)) == 1


def test_jira_without_identifier_dedups_on_the_body(client, engine: Engine) -> None:
    body = fixture_body("jira.comment_created")
    assert post_jira(client, body).status_code == 202
    assert post_jira(client, body).get_json()["status"] == "duplicate"
    assert post_jira(client, fixture_body("jira.issue_created")).status_code == 202
    assert len(rows(engine)) == 2


def test_jira_payload_without_webhook_event_is_400(client) -> None:
    response = post_jira(client, json.dumps({"issue": {"key": "A-1"}}).encode())
    assert response.status_code == 400
    assert "webhookEvent" in response.get_json()["message"]


def test_jira_secret_accepts_signature_or_bearer(engine: Engine, settings: Settings) -> None:
    secured = settings.model_copy(update={"jira_webhook_secret": "jira-s3cret"})
    client = create_app(secured, engine=engine).test_client()
    body = fixture_body("jira.issue_created")
    signed = post_jira(client, body, **{"X-Hub-Signature": sign("jira-s3cret", body)})
    assert signed.status_code == 202
    other = fixture_body("jira.issue_updated")
    bearer = post_jira(client, other, signed=False, Authorization="Bearer jira-s3cret")
    assert bearer.status_code == 202
    unsigned = post_jira(client, fixture_body("jira.comment_created"), signed=False)
    assert unsigned.status_code == 401 and "X-Hub-Signature" in unsigned.get_json()["message"]
    forged = post_jira(client, body, **{"X-Hub-Signature": sign("guess", body)})
    assert forged.status_code == 401
    wrong_token = post_jira(client, body, signed=False, Authorization="Bearer guess")
    assert wrong_token.status_code == 401
    assert len(rows(engine)) == 2


def test_jira_wrong_content_type_is_415(client) -> None:
    response = client.post("/webhooks/jira", data=b"webhookEvent=x", content_type="text/plain")
    assert response.status_code == 415


def test_rows_are_counted_once_per_delivery(deliver, engine: Engine) -> None:
    for name in ("issues.opened", "issues.edited", "issue_comment.created", "pull_request.closed"):
        deliver(name, delivery=f"guid-{name}")
        deliver(name, delivery=f"guid-{name}")
    with transaction(engine) as session:
        assert session.scalar(select(func.count()).select_from(Delivery)) == 4

"""Hostile input at the edge: every malformed header, body or field is a 4xx naming it, never a 500.

Each case goes through the real endpoint on the test database (SQLite, or PostgreSQL when
configured, where overlong values, NUL characters and 64-bit overflows used to surface as
driver errors and 500 tracebacks). Nothing refused is stored.
"""

from __future__ import annotations

import codecs
import json
import uuid
from typing import Any

import pytest
from sqlalchemy import Engine, func, select

from playbook.db import transaction
from playbook.lessons import lifecycle
from playbook.models import Delivery, UsageEvent
from playbook.outcomes import usage
from tests.payloads import fixture_body, issues_opened, jira_issue_created
from tests.support import GITHUB_SECRET, JIRA_SECRET, saw
from webhooks.signatures import sign

AUTH = {"Authorization": "Bearer agent-token"}


@pytest.fixture
def app(shared_app):
    """One app for the module: its tests only send requests (the database is emptied for each)."""
    return shared_app()


def stored(engine: Engine) -> list[Delivery]:
    with transaction(engine) as session:
        return list(session.scalars(select(Delivery).order_by(Delivery.id)))


def nested(depth: int) -> bytes:
    return b'{"action": "opened", "x": ' + b'{"a": ' * depth + b"1" + b"}" * depth + b"}"


def post_github(client, body: bytes, **overrides: str | None):
    headers: dict[str, str] = {
        "X-GitHub-Event": "issues",
        "X-GitHub-Delivery": str(uuid.uuid4()),
        "X-Hub-Signature-256": sign(GITHUB_SECRET, body),
        "Content-Type": "application/json",
    }
    for option, value in overrides.items():
        name = option.replace("_", "-")
        if value is None:
            headers.pop(name, None)
        else:
            headers[name] = value
    return client.post("/webhooks/github", data=body, headers=headers)


GITHUB_BODIES = [
    # (id, body, message fragment)
    ("utf16-le", codecs.BOM_UTF16_LE + '{"a": 1}'.encode("utf-16-le"), "UTF-8"),
    ("utf16-be", codecs.BOM_UTF16_BE + '{"a": 1}'.encode("utf-16-be"), "UTF-8"),
    ("utf32-le", codecs.BOM_UTF32_LE + '{"a": 1}'.encode("utf-32-le"), "UTF-8"),
    ("utf32-be", codecs.BOM_UTF32_BE + '{"a": 1}'.encode("utf-32-be"), "UTF-8"),
    ("utf16-no-bom", '{"a": 1}'.encode("utf-16-le"), "UTF-8"),
    ("latin1", '{"action": "opened", "t": "café"}'.encode("latin-1"), "not UTF-8"),
    ("overlong-utf8", b'{"a": "\xc0\xaf"}', "not UTF-8"),
    ("encoded-surrogate", b'{"a": "\xed\xa0\x80"}', "not UTF-8"),
    ("truncated-utf8", b'{"a": "\xe2\x82"}', "not UTF-8"),
    ("lone-high-surrogate", b'{"action": "opened", "t": "\\ud800"}', "surrogate"),
    ("lone-low-surrogate", b'{"action": "opened", "t": "\\udc00x"}', "surrogate"),
    ("surrogate-key", b'{"action": "opened", "\\ud83d": 1}', "surrogate"),
    ("surrogate-deep", b'{"action": "opened", "a": [{"b": ["\\uDBFF"]}]}', "surrogate"),
    ("nested-1001", nested(1001), "nested deeper"),
    ("nested-101", nested(101), "nested deeper"),
    ("nested-arrays", b'{"a": ' + b"[" * 5000 + b"]" * 5000 + b"}", "nested deeper"),
    ("huge-int", b'{"action": "opened", "n": ' + b"9" * 5000 + b"}", "not valid JSON"),
    ("nan", b'{"action": "opened", "n": NaN}', "not valid JSON"),
    ("infinity", b'{"action": "opened", "n": -Infinity}', "not valid JSON"),
    ("empty", b"", "not valid JSON"),
    ("whitespace", b"   ", "not valid JSON"),
    ("array", b"[1, 2]", "JSON object"),
    ("string", b'"issues"', "JSON object"),
    ("null", b"null", "JSON object"),
    ("number", b"42", "JSON object"),
    ("truncated", b'{"action": "opened", "issue": {', "not valid JSON"),
    ("trailing", b'{"action": "opened"} x', "not valid JSON"),
    ("raw-control", b'{"action": "op\x01ened"}', "not valid JSON"),
    ("raw-nul", b'{"action": "opened"}\x00', "NUL bytes"),
    ("action-number", issues_opened(action=7), "action"),
    ("action-list", issues_opened(action=["opened"]), "action"),
    ("action-object", issues_opened(action={"a": 1}), "action"),
    ("action-true", issues_opened(action=True), "action"),
    ("action-long", issues_opened(action="a" * 101), "action"),
    ("action-nul", issues_opened(action="opened\u0000"), "action"),
    ("action-space", issues_opened(action="opened now"), "action"),
    ("action-unicode", issues_opened(action="öffnen"), "action"),
    ("installation-2^63", issues_opened(installation={"id": 2**63}), "installation.id"),
    ("installation-2^64", issues_opened(installation={"id": 2**64 + 5}), "installation.id"),
    ("installation-true", issues_opened(installation={"id": True}), "installation.id"),
    ("installation-false", issues_opened(installation={"id": False}), "installation.id"),
    ("installation-zero", issues_opened(installation={"id": 0}), "installation.id"),
    ("installation-negative", issues_opened(installation={"id": -1}), "installation.id"),
    ("installation-string", issues_opened(installation={"id": "12"}), "installation.id"),
    ("installation-float", issues_opened(installation={"id": 1.5}), "installation.id"),
    ("installation-list", issues_opened(installation={"id": [1]}), "installation.id"),
    ("installation-not-object", issues_opened(installation="12"), "installation"),
    ("installation-list-object", issues_opened(installation=[12]), "installation"),
]


@pytest.mark.parametrize(
    ("body", "message"), [case[1:] for case in GITHUB_BODIES], ids=[c[0] for c in GITHUB_BODIES]
)
def test_hostile_github_bodies_are_400(client, engine: Engine, body: bytes, message: str) -> None:
    response = post_github(client, body)
    assert response.status_code == 400, response.get_json()
    assert response.get_json()["status"] == "error"
    assert message in response.get_json()["message"]
    assert "\n" not in response.get_json()["message"]  # one line, never a traceback
    assert stored(engine) == []


GITHUB_HEADERS = [
    ("signature-latin1", {"X-Hub-Signature-256": "sha256=" + "é" * 64}, 401, "does not match"),
    ("signature-prefix-only", {"X-Hub-Signature-256": "sha256="}, 401, "does not match"),
    ("signature-huge", {"X-Hub-Signature-256": "sha256=" + "a" * 10_000}, 401, "does not match"),
    ("signature-sha1", {"X-Hub-Signature-256": "sha1=" + "0" * 40}, 401, "does not match"),
    ("event-latin1", {"X-GitHub-Event": "issuès"}, 400, "X-GitHub-Event"),
    ("event-long", {"X-GitHub-Event": "e" * 101}, 400, "X-GitHub-Event"),
    ("event-punctuation", {"X-GitHub-Event": "issues;drop"}, 400, "X-GitHub-Event"),
    ("event-blank", {"X-GitHub-Event": "   "}, 400, "X-GitHub-Event"),
    ("delivery-long", {"X-GitHub-Delivery": "d" * 201}, 400, "X-GitHub-Delivery"),
    ("delivery-latin1", {"X-GitHub-Delivery": "lieferüng"}, 400, "X-GitHub-Delivery"),
    ("delivery-space", {"X-GitHub-Delivery": "a b"}, 400, "X-GitHub-Delivery"),
    ("delivery-blank", {"X-GitHub-Delivery": " "}, 400, "X-GitHub-Delivery"),
    ("content-type-text", {"Content-Type": "text/plain"}, 415, "application/json"),
    ("content-type-form", {"Content-Type": "application/x-www-form-urlencoded"}, 415, "json"),
    ("content-type-missing", {"Content-Type": None}, 415, "application/json"),
]


@pytest.mark.parametrize(
    ("headers", "status", "message"),
    [case[1:] for case in GITHUB_HEADERS],
    ids=[c[0] for c in GITHUB_HEADERS],
)
def test_hostile_github_headers_are_4xx(
    client, engine: Engine, headers: dict[str, str | None], status: int, message: str
) -> None:
    response = post_github(client, fixture_body("issues.opened"), **headers)
    assert response.status_code == status, response.get_json()
    assert message in response.get_json()["message"]
    assert stored(engine) == []


def test_a_byte_order_mark_is_dropped_and_the_delivery_stored(client, engine: Engine) -> None:
    body = codecs.BOM_UTF8 + fixture_body("issues.opened")
    assert post_github(client, body).status_code == 202
    [row] = stored(engine)
    assert not row.payload.startswith("\ufeff")
    assert json.loads(row.payload)["action"] == "opened"


def test_paired_surrogates_and_nul_escapes_are_fine_text(client, engine: Engine) -> None:
    body = b'{"action": "opened", "issue": {"title": "emoji \\ud83d\\ude00 and \\u0000"}}'
    assert post_github(client, body).status_code == 202
    assert len(stored(engine)) == 1


def test_an_overlong_kept_header_is_cut_not_refused(client, engine: Engine) -> None:
    response = post_github(client, fixture_body("issues.opened"), User_Agent="x" * 50_000)
    assert response.status_code == 202
    [row] = stored(engine)
    assert len(row.headers["User-Agent"]) == 1000


# --- Jira ------------------------------------------------------------------------------------


def post_jira(client, body: bytes, sign_it: bool = True, **headers: str):
    if sign_it:
        headers.setdefault("X-Hub-Signature", sign(JIRA_SECRET, body))
    return client.post(
        "/webhooks/jira", data=body, headers=headers, content_type="application/json"
    )


JIRA_CASES = [
    ("event-missing", jira_issue_created(webhookEvent=None), {}, 400, "webhookEvent"),
    ("event-number", jira_issue_created(webhookEvent=5), {}, 400, "webhookEvent"),
    ("event-long", jira_issue_created(webhookEvent="j" * 101), {}, 400, "webhookEvent"),
    (
        "event-nul",
        jira_issue_created(webhookEvent="jira:issue_created\u0000"),
        {},
        400,
        "webhookEvent",
    ),
    (
        "type-name-object",
        jira_issue_created(issue_event_type_name={}),
        {},
        400,
        "issue_event_type_name",
    ),
    (
        "type-name-long",
        jira_issue_created(issue_event_type_name="t" * 101),
        {},
        400,
        "issue_event_type",
    ),
    (
        "identifier-long",
        jira_issue_created(),
        {"X-Atlassian-Webhook-Identifier": "i" * 201},
        400,
        "X-Atlassian-Webhook-Identifier",
    ),
    (
        "identifier-latin1",
        jira_issue_created(),
        {"X-Atlassian-Webhook-Identifier": "ïd"},
        400,
        "X-Atlassian-Webhook-Identifier",
    ),
    ("bom-utf16", codecs.BOM_UTF16_LE + "{}".encode("utf-16-le"), {}, 400, "UTF-8"),
    ("nested", nested(2000), {}, 400, "nested deeper"),
    ("surrogate", b'{"webhookEvent": "x", "t": "\\udfff"}', {}, 400, "surrogate"),
    ("array", b"[]", {}, 400, "JSON object"),
]


@pytest.mark.parametrize(
    ("body", "headers", "status", "message"),
    [case[1:] for case in JIRA_CASES],
    ids=[c[0] for c in JIRA_CASES],
)
def test_hostile_jira_deliveries_are_4xx(
    client, engine: Engine, body: bytes, headers: dict[str, str], status: int, message: str
) -> None:
    response = post_jira(client, body, **headers)
    assert response.status_code == status, response.get_json()
    assert message in response.get_json()["message"]
    assert stored(engine) == []


@pytest.mark.parametrize(
    "headers",
    [
        {"Authorization": "Bearer jïra"},
        {"Authorization": "Bearer " + "é" * 300},
        {"Authorization": "Basic " + JIRA_SECRET},
        {"X-Hub-Signature": "sha256=ü"},
        {"X-Hub-Signature": sign(JIRA_SECRET, b"other body")},
    ],
    ids=["bearer-latin1", "bearer-long", "basic", "signature-latin1", "signature-other-body"],
)
def test_jira_credentials_that_do_not_match_are_401(client, engine: Engine, headers) -> None:
    response = post_jira(client, jira_issue_created(), sign_it=False, **headers)
    assert response.status_code == 401
    assert stored(engine) == []


# --- the agent API ---------------------------------------------------------------------------


def cite(**changes: Any) -> dict[str, Any]:
    return {"event": "cited", "lessonIds": ["pb-1"], "ticketId": "CTMS-9", **changes}


API_CASES = [
    ("rank-2^40", cite(rank=2**40), "rank"),
    ("rank-negative", cite(rank=-1), "rank"),
    ("rank-string", cite(rank="1"), "rank"),
    ("rank-bool", cite(rank=True), "rank"),
    ("ticket-nul", cite(ticketId="CTMS-\u00009"), "NUL"),
    ("ticket-long", cite(ticketId="T" * 201), "ticketId"),
    ("ticket-object", cite(ticketId={"key": "CTMS-9"}), "ticketId"),
    ("ticket-bool", cite(ticketId=True), "ticketId"),
    ("phase-long", cite(phase="p" * 65), "phase"),
    ("phase-nul", cite(phase="plan\u0000"), "NUL"),
    ("consumer-long", cite(consumer="c" * 201), "consumer"),
    ("query-id-long", cite(queryId="q" * 65), "queryId"),
    ("lesson-id-long", cite(lessonIds=["pb-" + "1" * 70]), "lessonIds"),
    ("lesson-id-nul", cite(lessonIds=["pb-1\u0000"]), "NUL"),
    ("lesson-ids-empty", cite(lessonIds=[]), "lessonIds"),
    ("lesson-ids-numbers", cite(lessonIds=[1, 2]), "lessonIds"),
    ("lesson-ids-too-many", cite(lessonIds=[f"pb-{n}" for n in range(1, 300)]), "lessonIds"),
    ("ts-garbage", cite(ts="yesterday"), "ts"),
    ("ts-overflow", cite(ts=1e300), "ts"),
    ("ts-negative-overflow", cite(ts=-1e300), "ts"),
    ("ts-list", cite(ts=[1]), "ts"),
    ("event-unknown", cite(event="used"), "event"),
    ("success-string", cite(phaseSuccess="yes"), "phaseSuccess"),
    ("not-an-object", [1], "JSON object"),
]


@pytest.mark.parametrize(
    ("event", "message"), [case[1:] for case in API_CASES], ids=[c[0] for c in API_CASES]
)
def test_hostile_agent_events_are_400(client, seeded: Engine, event: Any, message: str) -> None:
    response = client.post("/api/v1/usage", json=event, headers=AUTH)
    assert response.status_code == 400, response.get_json()
    assert message in response.get_json()["message"]
    with transaction(seeded) as session:
        assert session.scalar(select(func.count()).select_from(UsageEvent)) == 0


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (nested(1500), "nested deeper"),
        (b'{"event": "cited", "lessonIds": ["\\ud800"]}', "surrogate"),
        (b"\xff\xfe{}", "UTF-8"),
        (b"not json", "not valid JSON"),
        (json.dumps([cite()] * 1001).encode(), "at most 1000 events"),
        (b"[]", "no events"),
    ],
    ids=["nested", "surrogate", "utf16", "garbage", "too-many", "empty-list"],
)
def test_hostile_agent_bodies_are_400(client, seeded: Engine, body: bytes, message: str) -> None:
    response = client.post(
        "/api/v1/usage", data=body, headers=AUTH, content_type="application/json"
    )
    assert response.status_code == 400, response.get_json()
    assert message in response.get_json()["message"]


@pytest.mark.parametrize(
    ("headers", "status"),
    [
        ({"Authorization": "Bearer agént-token"}, 401),
        ({"Authorization": "Bearer " + "x" * 5000}, 401),
        ({**AUTH, "Idempotency-Key": "k" * 201}, 400),
        ({**AUTH, "Idempotency-Key": "schlüssel"}, 400),
    ],
    ids=["bearer-latin1", "bearer-long", "key-long", "key-latin1"],
)
def test_hostile_agent_headers(client, seeded: Engine, headers: dict[str, str], status) -> None:
    response = client.post("/api/v1/usage", json=cite(), headers=headers)
    assert response.status_code == status


@pytest.mark.parametrize("bullet_id", ["pb-" + "9" * 100, "pb-1%00", "%C0%AF"])
def test_hostile_bullet_ids_in_the_path_are_4xx(client, seeded: Engine, bullet_id: str) -> None:
    response = client.get(f"/api/v1/bullets/{bullet_id}", headers=AUTH)
    assert response.status_code in (400, 404)
    assert response.mimetype == "application/problem+json"
    assert response.get_json()["status"] == response.status_code


def test_one_id_repeated_is_one_cite_within_the_documented_200(client, seeded: Engine) -> None:
    saw(seeded, "CTMS-9")  # a ticket the bot knows, so the cite counts
    # The OpenAPI document says at most 200 ids: counted as sent, repeats included.
    refused = client.post("/api/v1/usage", json=cite(lessonIds=["pb-1"] * 5000), headers=AUTH)
    assert refused.status_code == 400 and refused.get_json()["field"] == "lessonIds"
    response = client.post("/api/v1/usage", json=cite(lessonIds=["pb-1"] * 200), headers=AUTH)
    assert response.status_code == 201 and response.get_json()["events"] == 1
    again = client.post("/api/v1/usage", json=cite(lessonIds=["pb-1", "pb-1"]), headers=AUTH)
    assert again.status_code == 201 and again.get_json()["events"] == 0
    with transaction(seeded) as session:
        assert lifecycle.get(session, "pb-1").cites == 1


def test_a_later_report_settles_the_outcome_of_a_cite_once(client, seeded: Engine) -> None:
    saw(seeded, "CTMS-9")
    with transaction(seeded) as session:
        # A merged PR rated pb-1: a report's outcome may then rate it once too.
        usage.record(session, "cited", ["pb-1"], ticket_key="CTMS-8", pr_key="a/b#1", success=True)
    client.post("/api/v1/usage", json=cite(), headers=AUTH)
    client.post("/api/v1/usage", json=cite(phaseSuccess=True), headers=AUTH)
    client.post("/api/v1/usage", json=cite(phaseSuccess=True), headers=AUTH)
    with transaction(seeded) as session:
        bullet = lifecycle.get(session, "pb-1")
        assert (bullet.cites, bullet.cites_success, bullet.cites_failure) == (2, 2, 0)


def test_no_hostile_case_is_a_server_error(client, seeded: Engine) -> None:
    """The whole set above, once more, counted: none of them may be a 5xx."""
    answers = [post_github(client, body).status_code for _id, body, _m in GITHUB_BODIES]
    answers += [
        post_github(client, fixture_body("issues.opened"), **headers).status_code
        for _id, headers, _s, _m in GITHUB_HEADERS
    ]
    answers += [
        post_jira(client, body, **headers).status_code for _i, body, headers, *_ in JIRA_CASES
    ]
    answers += [
        client.post("/api/v1/usage", json=event, headers=AUTH).status_code
        for _id, event, _m in API_CASES
    ]
    assert len(answers) >= 90
    assert all(400 <= status < 500 for status in answers), answers

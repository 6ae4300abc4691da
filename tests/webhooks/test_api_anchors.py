"""Anchors over the API: proposed, shown, set by a maintainer, searched by `paths`."""

from __future__ import annotations

import pytest
from sqlalchemy import Engine

from playbook.db import transaction
from playbook.lessons import lifecycle
from tests.webhooks.test_api_supersede import problem

MAINTAINER = {"Authorization": "Bearer maintainer-token"}
AGENT = {"Authorization": "Bearer agent-token-1"}
TEXT = "Release rows in id order inside one transaction"
SUMMARY = "Checkout deadlocks when a payment is retried"


@pytest.fixture
def api(shared_app):
    tokens = {"api_token": "maintainer-token", "agent_tokens": "claude:agent-token-1"}
    return shared_app(**tokens).test_client()


@pytest.fixture
def playbook(engine: Engine) -> None:
    with transaction(engine) as session:
        for n in range(6):
            lifecycle.add(session, f"Unrelated lesson {n} on topic{n}", learned_from="X", actor="t")
        lifecycle.add(
            session, "Payment retries in checkout can deadlock", learned_from="S", actor="t"
        )


def test_a_proposal_carries_its_anchors_and_the_detail_shows_them(api, playbook) -> None:
    body = {
        "text": TEXT,
        "learned_from": "SHOP-2",
        "paths": ["./orders/locking.py", "orders/locking.py"],
        "symbols": ["OrderLock.acquire"],
    }
    answer = api.post("/api/v1/lessons", json=body, headers=AGENT)
    assert answer.status_code == 201, answer.text
    lesson = answer.get_json()["lesson"]
    assert lesson["paths"] == ["orders/locking.py"]
    detail = api.get(f"/api/v1/lessons/{lesson['id']}", headers=AGENT).get_json()
    assert (detail["paths"], detail["symbols"]) == (["orders/locking.py"], ["OrderLock.acquire"])
    plain = api.post(
        "/api/v1/lessons", json={"text": "No anchors", "learned_from": "S-3"}, headers=AGENT
    )
    assert plain.get_json()["lesson"]["paths"] is None


@pytest.mark.parametrize(
    ("field", "value", "why"),
    [
        ("paths", ["../secrets.env"], "'..'"),
        ("paths", ["/etc/passwd"], "absolute"),
        ("paths", ["a\\b.py"], "backslash"),
        ("paths", [f"a{n}.py" for n in range(11)], "10"),
        ("symbols", ["drop table"], "not a name"),
        ("symbols", "OrderLock", "list"),
    ],
)
def test_a_bad_anchor_is_a_4xx_naming_the_field(api, playbook, field, value, why) -> None:
    body = {"text": TEXT, "learned_from": "SHOP-2", field: value}
    answer = api.post("/api/v1/lessons", json=body, headers=AGENT)
    assert 400 <= answer.status_code < 500 and answer.status_code != 404, answer.text
    assert field in answer.text and why in answer.text
    assert "Traceback" not in answer.text
    # The sentence a person reads, without pydantic's "Value error, " in front.
    assert answer.get_json()["detail"].startswith(f"{field}: ")
    assert "Value error" not in answer.text


def test_a_maintainer_sets_and_clears_anchors(api, playbook, engine: Engine) -> None:
    url = "/api/v1/lessons/pb-7/anchors"
    done = api.post(
        url, json={"paths": ["orders/**"], "reason": "about locking"}, headers=MAINTAINER
    )
    assert done.status_code == 200, done.text
    assert done.get_json()["changed"] is True
    assert done.get_json()["lesson"]["paths"] == ["orders/**"]
    same = api.post(url, json={"paths": ["orders/**"]}, headers=MAINTAINER)
    assert same.get_json()["changed"] is False
    symbols = api.post(url, json={"symbols": ["OrderLock"]}, headers=MAINTAINER).get_json()
    assert symbols["lesson"]["paths"] == ["orders/**"]  # left out: left as it was
    cleared = api.post(url, json={"paths": [], "symbols": []}, headers=MAINTAINER).get_json()
    assert (cleared["lesson"]["paths"], cleared["lesson"]["symbols"]) == (None, None)
    detail = api.get("/api/v1/lessons/pb-7", headers=MAINTAINER).get_json()
    assert [r["action"] for r in detail["revisions"]][:3] == ["edit", "edit", "edit"]
    refused = problem(api.post(url, json={"paths": ["a.py"]}, headers=AGENT), 403)
    assert "only a maintainer may edit a lesson" in refused
    problem(api.post("/api/v1/lessons/pb-99/anchors", json={"paths": []}, headers=MAINTAINER), 404)
    bad = api.post(url, json={"paths": ["../x"]}, headers=MAINTAINER)
    assert 400 <= bad.status_code < 500 and "paths" in bad.text


def test_search_by_paths_raises_the_anchored_lesson(api, playbook, engine: Engine) -> None:
    with transaction(engine) as session:
        lesson = lifecycle.add(
            session, TEXT, learned_from="SHOP-2", actor="t", paths="orders/locking.py"
        ).bullet.id
    plain = api.get("/api/v1/search", query_string={"q": SUMMARY}, headers=AGENT).get_json()
    assert lesson not in [hit["id"] for hit in plain["lessons"]]
    posted = api.post(
        "/api/v1/search", json={"query": SUMMARY, "paths": ["orders/locking.py"]}, headers=AGENT
    ).get_json()
    assert posted["lessons"][0]["id"] == lesson
    trace = f'{SUMMARY}\n  File "/srv/src/orders/locking.py", line 9, in acquire'
    traced = api.post("/api/v1/search", json={"query": trace}, headers=AGENT).get_json()
    assert traced["lessons"][0]["id"] == lesson
    bad = api.post("/api/v1/search", json={"query": SUMMARY, "paths": ["../x"]}, headers=AGENT)
    assert 400 <= bad.status_code < 500 and "paths" in bad.text


def test_get_search_takes_paths_one_parameter_each(api, playbook, engine: Engine) -> None:
    with transaction(engine) as session:
        lesson = lifecycle.add(
            session, TEXT, learned_from="SHOP-2", actor="t", paths="orders/locking.py"
        ).bullet.id
    url = "/api/v1/search"
    got = api.get(
        url,
        query_string=[("q", SUMMARY), ("paths", "README.md"), ("paths", "src/orders/locking.py")],
        headers=AGENT,
    ).get_json()
    assert got["lessons"][0]["id"] == lesson
    # What POST /search answers for the same paths.
    posted = api.post(
        url, json={"query": SUMMARY, "paths": ["README.md", "src/orders/locking.py"]}, headers=AGENT
    ).get_json()
    assert [hit["id"] for hit in got["lessons"]] == [hit["id"] for hit in posted["lessons"]]
    for bad, why in (("../x", "'..'"), ("/etc/passwd", "absolute"), ("a" * 201, "")):
        answer = api.get(url, query_string={"q": SUMMARY, "paths": bad}, headers=AGENT)
        assert 400 <= answer.status_code < 500, answer.text
        assert "paths" in answer.get_json()["field"] and why in answer.text
    too_many = [("q", SUMMARY)] + [("paths", f"a{n}.py") for n in range(51)]
    answer = api.get(url, query_string=too_many, headers=AGENT)
    assert 400 <= answer.status_code < 500 and "paths" in answer.get_json()["field"]


def test_a_parameter_that_is_no_list_given_twice_is_refused(api, playbook) -> None:
    # Read silently, the first ticket would be searched and the second dropped.
    answer = api.get(
        "/api/v1/search",
        query_string=[("q", SUMMARY), ("ticket", "SHOP-1"), ("ticket", "SHOP-2")],
        headers=AGENT,
    )
    assert answer.status_code == 400
    assert answer.get_json()["field"] == "ticket"
    assert "once" in answer.get_json()["detail"]

"""GET /api/v1/experiment, and the measured effect in GET /api/v1/lessons/{id}."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import Engine

from playbook.experiment import statistics
from tests import holdout_world
from tests.holdout_world import HARMFUL

MAINTAINER = {"Authorization": "Bearer maintainer-token"}
AGENT = {"Authorization": "Bearer agent-token"}
# pb-3, the harmful lesson, is in acme/api; pb-4 in other/web.
THEIRS = {"Authorization": "Bearer web-token"}
OURS = {"Authorization": "Bearer api-token"}


@pytest.fixture
def client(seeded: Engine, shared_app: Any) -> Any:
    """The holdout world, and a client of the module's app (its tests only send requests)."""
    holdout_world.build(seeded)
    changes = {
        "api_token": "maintainer-token",
        "agent_tokens": "bot:agent-token,web@other/web:web-token,api@acme/api:api-token",
        "effect_min_tickets": holdout_world.MIN_TICKETS,
    }
    return shared_app(**changes).test_client()


def test_maintainers_and_agents_read_the_report(client: Any) -> None:
    for headers in (MAINTAINER, AGENT, OURS):
        answer = client.get("/api/v1/experiment", headers=headers)
        assert answer.status_code == 200, answer.text
        assert answer.mimetype == "application/json"
        built = answer.get_json()
        shown, held_out = built["arms"]["shown"], built["arms"]["held_out"]
        assert (shown["tickets"], shown["with_outcome"], shown["merged"]) == (30, 29, 20)
        assert (held_out["tickets"], held_out["with_outcome"], held_out["merged"]) == (10, 10, 9)
        assert shown["merge_rate"] == pytest.approx(20 / 29)
        assert held_out["merge_rate_ci"] == pytest.approx(list(statistics.wilson_interval(9, 10)))
        comparison = statistics.newcombe_difference(20, 29, 9, 10)
        assert built["difference"]["merge_rate"] == pytest.approx(comparison.difference)
        assert built["difference"]["ci"] == pytest.approx([comparison.low, comparison.high])
        assert "21 points less often" in built["verdict"]
        assert built["measured_harmful"] == [HARMFUL]
        assert built["lessons"][0]["id"] == HARMFUL
        assert built["lessons"][0]["verdict"] == "measured harmful"
        assert built["experiment"]["running"]["percent"] == 20
        assert built["min_tickets"] == holdout_world.MIN_TICKETS
    assert client.get("/api/v1/experiment").status_code == 401


def test_an_agent_of_another_scope_sees_no_lesson_of_acme(client: Any) -> None:
    answer = client.get("/api/v1/experiment", headers=THEIRS)
    assert answer.status_code == 200, answer.text
    built = answer.get_json()
    assert built["lessons"] == []
    assert built["measured_harmful"] == []
    assert HARMFUL not in answer.text
    assert "chromium" not in answer.text
    assert built["arms"]["shown"]["tickets"] == 30  # the arms are the whole experiment's


def test_the_window_is_over_when_tickets_were_assigned(client: Any) -> None:
    def arms(query: str) -> tuple[int, int]:
        answer = client.get(f"/api/v1/experiment?{query}", headers=MAINTAINER)
        assert answer.status_code == 200, answer.text
        found = answer.get_json()["arms"]
        return found["shown"]["tickets"], found["held_out"]["tickets"]

    assert arms("until=2026-03-01") == (10, 10)
    assert arms("since=2026-03-02") == (20, 0)
    assert arms("since=2026-03-05T11:00:00Z&until=2026-03-05T14:00:00%2B01:00") == (20, 0)
    assert arms("since=2026-03-01T12:30:00%2B01:00&until=2026-03-01T11:59:59.5z") == (0, 0)
    # Before the first instant Python holds in UTC: the window is open on that side.
    assert arms("since=0001-01-01T00:00:00%2B05:00") == (30, 10)
    assert arms("since=2026-03-06&until=2026-03-01") == (0, 0)


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ("since=2026-02-30", "since"),
        ("since=yesterday", "since"),
        ("until=2026-03-01T10:00", "until"),  # no offset: in which zone?
        ("until=2026-03-01+10:00:00Z", "until"),
        ("since=" + "2" * 41, "since"),
        ("until=1767225600", "until"),
    ],
)
def test_a_bad_date_is_a_400_naming_the_field(client: Any, query: str, field: str) -> None:
    answer = client.get(f"/api/v1/experiment?{query}", headers=MAINTAINER)
    assert answer.status_code == 400, answer.text
    assert answer.mimetype == "application/problem+json"
    problem = answer.get_json()
    assert problem["field"] == field
    assert "2026-11-17" in problem["detail"] or "at most" in problem["detail"]


def test_the_openapi_document_describes_the_report(client: Any) -> None:
    document = client.get("/api/v1/openapi.json").get_json()
    operation = document["paths"]["/api/v1/experiment"]["get"]
    assert {p["name"] for p in operation["parameters"]} == {"since", "until"}
    schemas = document["components"]["schemas"]

    def resolve(schema: dict[str, Any]) -> dict[str, Any]:
        for branch in schema.get("anyOf", []):
            if "$ref" in branch:
                return resolve(branch)
        ref = schema.get("$ref")
        return schemas[ref.rsplit("/", 1)[1]] if ref else schema

    response = operation["responses"]["200"]["content"]["application/json"]["schema"]
    report = resolve(response)
    assert {"arms", "difference", "verdict", "srm", "needed", "lessons"} <= set(report["required"])
    arms = resolve(report["properties"]["arms"])
    for arm in ("shown", "held_out"):
        fields = resolve(arms["properties"][arm])["properties"]
        assert {"tickets", "with_outcome", "merged", "merge_rate", "merge_rate_ci"} <= set(fields)
    assert {"merge_rate", "ci"} <= set(resolve(report["properties"]["difference"])["properties"])
    detail = document["paths"]["/api/v1/lessons/{id}"]["get"]["responses"]["200"]
    lesson = resolve(detail["content"]["application/json"]["schema"])
    assert "effect" in lesson["properties"]


def test_a_lessons_answer_has_its_measured_effect(client: Any) -> None:
    detail = client.get(f"/api/v1/lessons/{HARMFUL}", headers=OURS).get_json()
    effect = detail["effect"]
    assert effect["shown"] == {"tickets": 10, "with_outcome": 10, "merged": 1}
    assert effect["held_out"] == {"tickets": 10, "with_outcome": 10, "merged": 9}
    assert effect["difference"] == pytest.approx(-0.8)
    assert effect["verdict"] == "measured harmful"
    quiet = client.get("/api/v1/lessons/pb-2", headers=MAINTAINER).get_json()["effect"]
    assert quiet["verdict"] == "not enough data"
    assert quiet["shown"]["tickets"] == quiet["held_out"]["tickets"] == 0

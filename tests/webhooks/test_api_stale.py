"""GET /api/v1/stale (each token its scope) and POST /api/v1/lessons/{id}/clear-stale."""

from __future__ import annotations

import pytest
from sqlalchemy import Engine

from playbook.anchors.stale import FileChange, flag
from playbook.db import transaction
from playbook.lessons import lifecycle

MAINTAINER = {"Authorization": "Bearer maintainer-token"}
AGENT = {"Authorization": "Bearer agent-token-1"}
SCOPED = {"Authorization": "Bearer acme-token-1"}


@pytest.fixture
def api(shared_app):
    tokens = {
        "api_token": "maintainer-token",
        "agent_tokens": "bot:agent-token-1,acme-bot@acme/api:acme-token-1",
    }
    return shared_app(**tokens).test_client()


def _flagged(engine: Engine, scope: str, text: str) -> str:
    with transaction(engine) as session:
        added = lifecycle.add(session, text, learned_from="T-1", actor="t", scope=scope)
        added.bullet.paths = ["orders/locking.py"]
        session.flush()
        flag(session, scope, f"{scope}#12", [FileChange("removed", "orders/locking.py")], actor="b")
        return added.bullet.id


def test_each_token_sees_its_scope_and_only_a_maintainer_clears(api, engine: Engine) -> None:
    ours = _flagged(engine, "acme/api", "Take the row lock before the stock check")
    theirs = _flagged(engine, "other/web", "Lock the cart row before pricing")
    everything = api.get("/api/v1/stale", headers=MAINTAINER).get_json()["lessons"]
    assert [row["id"] for row in everything] == [ours, theirs]
    assert everything[0]["stale_pr"] == "acme/api#12" and everything[0]["files_gone"] is True
    scoped = api.get("/api/v1/stale", headers=SCOPED).get_json()["lessons"]
    assert [row["id"] for row in scoped] == [ours]

    refused = api.post(f"/api/v1/lessons/{ours}/clear-stale", json={}, headers=AGENT)
    assert refused.status_code == 403
    hidden = api.post("/api/v1/lessons/pb-999/clear-stale", json={}, headers=MAINTAINER)
    assert hidden.status_code == 404
    url = f"/api/v1/lessons/{ours}/clear-stale"
    done = api.post(url, json={"reason": "the lock moved, the lesson holds"}, headers=MAINTAINER)
    assert done.status_code == 200, done.text
    assert done.get_json()["changed"] is True
    assert api.post(url, json={}, headers=MAINTAINER).get_json()["changed"] is False
    left = api.get("/api/v1/stale", headers=MAINTAINER).get_json()["lessons"]
    assert [row["id"] for row in left] == [theirs]


def test_stats_tell_the_bots_own_deprecation_from_a_maintainers(api, engine: Engine) -> None:
    from playbook.lessons import demotions

    by_hand = _flagged(engine, "acme/api", "Take the row lock before the stock check")
    by_bot = _flagged(engine, "other/web", "Lock the cart row before pricing")
    with transaction(engine) as session:
        lifecycle.deprecate(session, by_hand, reason="the lock is gone", actor="maintainer")
        reason = f"{demotions.REVERTED}other/web#13)"
        lifecycle.deprecate(session, by_bot, reason=reason, actor="playbook-bot (reverted)")
    week = api.get("/api/v1/stats", headers=MAINTAINER).get_json()["stale"]["week"]
    assert (week["flagged"], week["deprecated"], week["deprecated_by_bot"]) == (2, 1, 1)
    assert week["open"] == 0

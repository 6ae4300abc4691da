"""A lesson's model ratings on its page, in the API and MCP, and in the stats of each door."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from mcp import Client
from sqlalchemy import Engine

from bot.config import Settings
from bot.mcp_server import build_server, local_caller
from playbook.db import transaction
from playbook.ratings.store import Scored, record
from tests.bot.test_mcp import run

MAINTAINER = {"Authorization": "Bearer maintainer-token"}
SCOPED = {"Authorization": "Bearer scoped-token"}
HOSTILE = '<script>alert("rated")</script> & <b>bold</b>'


@pytest.fixture
def make(shared_app: Any):
    """The app with a maintainer token and an agent token bound to acme/api (one per module
    for each set of changes: the tests only send requests)."""

    def build(**changes: Any) -> Any:
        tokens = {
            "api_token": "maintainer-token",
            "agent_tokens": "ci@acme/api:scoped-token",
            **changes,
        }
        return shared_app(**tokens).test_client()

    return build


def _rate(engine: Engine, bullet_id: str, score: float, reason: str, pr: str, day: int) -> None:
    with transaction(engine) as session:
        added = record(
            session,
            [Scored(bullet_id, score, reason)],
            pr_key=pr,
            ticket_key=None,
            model="judge-small",
            prompt_version="rate-1",
            at=datetime(2026, 11, day, 10, 0, tzinfo=UTC),
        )
    assert added == [bullet_id]


@pytest.fixture
def rated(seeded: Engine) -> Engine:
    """pb-1 (global) rated on acme/api#7 and other/web#2; pb-3 (acme/api) on acme/api#8."""
    _rate(seeded, "pb-1", 1.0, "The PR retried with the event id as the key", "acme/api#7", 20)
    _rate(seeded, "pb-1", -0.5, HOSTILE, "other/web#2", 21)
    _rate(seeded, "pb-3", 0.5, "Chromium was pinned as told", "acme/api#8", 22)
    return seeded


def test_the_lesson_page_shows_ratings_with_the_reason_escaped(make: Any, rated: Engine) -> None:
    client = make(ui_public_read=True)
    page = client.get("/ui/lessons/pb-1").text
    assert '<h2 id="ratings">Ratings</h2>' in page
    assert "2 in all, mean +0.25" in page and "the latest 2" in page
    # Newest first: the score, the PR, the model and prompt, the time, the reason.
    newest, older = page.index("other/web#2"), page.index("acme/api#7")
    assert newest < older
    assert "-0.50" in page and "+1.00" in page
    assert "by judge-small (rate-1) 2026-11-21 10:00" in page
    assert "The PR retried with the event id as the key" in page
    # A reason is the model's text: shown as text, never as markup.
    assert HOSTILE not in page and "<script>alert" not in page
    assert "&lt;script&gt;alert(&#34;rated&#34;)&lt;/script&gt; &amp; &lt;b&gt;bold" in page

    unrated = client.get("/ui/lessons/pb-2").text
    assert "not rated yet" in unrated and 'id="ratings"' not in unrated


def test_the_api_and_mcp_give_a_lessons_rating_count_and_mean(
    make: Any, rated: Engine, database_url: str
) -> None:
    api = make()
    lesson = api.get("/api/v1/lessons/pb-1", headers=MAINTAINER).get_json()
    assert lesson["ratings"] == {"count": 2, "mean": 0.25}
    assert api.get("/api/v1/lessons/pb-2", headers=MAINTAINER).get_json()["ratings"] == {
        "count": 0,
        "mean": None,
    }
    # A scoped agent reads the counters of a global lesson, as it reads its cites: no PR,
    # ticket or reason of another scope comes with them.
    scoped = api.get("/api/v1/lessons/pb-1", headers=SCOPED)
    assert scoped.get_json()["ratings"] == {"count": 2, "mean": 0.25}
    assert "other/web" not in scoped.get_data(as_text=True)
    schema = api.get("/api/v1/openapi.json", headers=MAINTAINER).get_json()
    detail = schema["components"]["schemas"]["LessonDetail"]["properties"]
    assert "ratings" in detail

    settings = Settings(PLAYBOOK_DATABASE_URL=database_url, PLAYBOOK_ACTOR="mcp:t", _env_file=None)

    async def session() -> None:
        server = build_server(settings, lambda: rated, local_caller(settings))
        async with Client(server) as client:
            got = await client.call_tool("get_lesson", {"id": "pb-3"})
            assert got.structured_content["ratings"] == {"count": 1, "mean": 0.5}

    run(session)


def test_stats_count_ratings_in_the_callers_view(make: Any, rated: Engine) -> None:
    api = make()
    everything = api.get("/api/v1/stats", headers=MAINTAINER).get_json()["ratings"]
    assert everything["count"] == 3 and everything["lessons"] == 2
    assert abs(everything["mean"] - (1.0 - 0.5 + 0.5) / 3) < 1e-9
    # acme/api counts its lesson's rating and the global lesson's on its own PR only.
    mine = api.get("/api/v1/stats", headers=SCOPED).get_json()["ratings"]
    assert mine == {"count": 2, "lessons": 2, "mean": 0.75}

    page = make(ui_public_read=True).get("/ui/stats").text
    assert "+0.33" in page and "model ratings: mean of 3 on 2 lessons" in page


def test_stats_without_ratings_say_none(make: Any, seeded: Engine) -> None:
    api = make()
    assert api.get("/api/v1/stats", headers=MAINTAINER).get_json()["ratings"] == {
        "count": 0,
        "lessons": 0,
        "mean": None,
    }
    assert "model ratings" not in make(ui_public_read=True).get("/ui/stats").text

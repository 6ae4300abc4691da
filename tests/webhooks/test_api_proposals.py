"""GET /api/v1/proposals and the MCP tool list_proposals: the page's batches, for maintainers."""

from __future__ import annotations

from typing import Any

import anyio
from mcp import Client
from sqlalchemy import Engine

from bot.config import Settings
from bot.mcp_server import build_server
from playbook import agents, db
from playbook.lessons import lifecycle
from webhooks.app import create_app

MAINTAINER, AGENT = "proposals-maintainer", "proposals-agent"
PR = "https://github.com/octo-org/widgets/pull/7"


def _world(engine: Engine) -> list[str]:
    with db.transaction(engine) as session:
        return [
            lifecycle.add(
                session,
                text,
                learned_from="CTMS-9",
                actor="t",
                status="proposed",
                source=source,
                source_url=url,
            ).bullet.id
            for text, source, url in (
                ("Always pin the base image digest", "review", f"{PR}#discussion_r1"),
                ("Make sure migrations are reversible", "review", f"{PR}#issuecomment-2"),
                ("Avoid sleeping in tests", "mcp", None),
            )
        ]


def test_the_api_lists_the_batches_to_a_maintainer_and_refuses_an_agent(
    engine: Engine, settings: Any
) -> None:
    one, two, alone = _world(engine)
    app = create_app(
        settings.model_copy(update={"api_token": MAINTAINER, "agent_tokens": f"ci:{AGENT}"}),
        engine=engine,
    )
    client = app.test_client()
    answer = client.get("/api/v1/proposals", headers={"Authorization": f"Bearer {MAINTAINER}"})
    assert answer.status_code == 200, answer.text
    body = answer.get_json()
    assert body["proposals"] == 3
    pulls = [b for b in body["batches"] if b["pull"]]
    assert [(b["key"], b["url"]) for b in pulls] == [("octo-org/widgets#7", PR)]
    assert [p["id"] for p in pulls[0]["proposals"]] == [one, two]
    assert pulls[0]["proposals"][0]["source_url"] == f"{PR}#discussion_r1"
    assert [b["proposals"][0]["id"] for b in body["batches"] if not b["pull"]] == [alone]
    refused = client.get("/api/v1/proposals", headers={"Authorization": f"Bearer {AGENT}"})
    assert refused.status_code == 403 and "only a maintainer" in refused.text
    assert one not in refused.text
    assert client.get("/api/v1/proposals").status_code == 401


def test_mcp_lists_the_same_batches_to_a_maintainer_and_errs_for_an_agent(
    engine: Engine, database_url: str
) -> None:
    one, two, alone = _world(engine)
    settings = Settings(PLAYBOOK_DATABASE_URL=database_url, _env_file=None)
    maintainer = agents.Caller(actor="mcp:carol", role="maintainer")
    agent = agents.Caller(actor="mcp:agent", role="agent")

    async def ask(caller: agents.Caller) -> Any:
        server = build_server(settings, lambda: engine, lambda _ctx: caller)
        async with Client(server) as client:
            return await client.call_tool("list_proposals", {})

    answer = anyio.run(ask, maintainer)
    assert not answer.is_error
    batches = answer.structured_content["batches"]
    assert [[p["id"] for p in b["proposals"]] for b in batches] == [[alone], [one, two]]
    assert batches[1]["key"] == "octo-org/widgets#7" and batches[1]["url"] == PR
    refused = anyio.run(ask, agent)
    assert refused.is_error
    text = " ".join(block.text for block in refused.content)
    assert "only a maintainer" in text and one not in text

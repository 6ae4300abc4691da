"""The MCP tools with anchors: propose_lesson takes paths and symbols, search_lessons paths."""

from __future__ import annotations

from sqlalchemy import Engine

from bot.config import Settings
from bot.mcp_server import build_server, local_caller
from playbook import db
from playbook.lessons import lifecycle
from tests.bot.test_mcp import error_text, run

TEXT = "Release rows in id order inside one transaction"


def test_propose_with_anchors_and_search_by_path(engine: Engine, settings: Settings) -> None:
    with db.transaction(engine) as session:
        for n in range(6):
            lifecycle.add(session, f"Unrelated lesson {n} on topic{n}", learned_from="X", actor="t")
        lifecycle.add(session, "Checkout retries can deadlock", learned_from="SHOP-1", actor="t")
    server = build_server(settings, lambda: engine, local_caller(settings))
    from mcp import Client

    async def session() -> None:
        async with Client(server) as client:
            proposed = await client.call_tool(
                "propose_lesson",
                {
                    "text": TEXT,
                    "learned_from": "SHOP-2",
                    "paths": ["./orders/locking.py"],
                    "symbols": ["OrderLock.acquire"],
                },
            )
            assert not proposed.is_error, proposed
            answer = proposed.structured_content
            assert answer["lesson"]["paths"] == ["orders/locking.py"]
            lesson = answer["lesson"]["id"]
            detail = (await client.call_tool("get_lesson", {"id": lesson})).structured_content
            assert detail["paths"] == ["orders/locking.py"]
            assert detail["symbols"] == ["OrderLock.acquire"]

            bad = await client.call_tool(
                "propose_lesson",
                {"text": "Another lesson", "learned_from": "SHOP-3", "paths": ["../x"]},
            )
            assert "paths" in error_text(bad) and "'..'" in error_text(bad)

            with db.transaction(engine) as writing:
                lifecycle.approve(writing, lesson, actor="t")
            found = await client.call_tool(
                "search_lessons",
                {"query": "Checkout deadlock on retry", "paths": ["src/orders/locking.py"]},
            )
            assert found.structured_content["lessons"][0]["id"] == lesson
            refused = await client.call_tool(
                "search_lessons", {"query": "deadlock", "paths": ["/etc/passwd"]}
            )
            assert "paths" in error_text(refused) and "absolute" in error_text(refused)

    run(session)

"""MCP and supersession: no tool supersedes; proposals name similar lessons; cites follow the
setting; a superseded lesson is read with its replacement and never found."""

from __future__ import annotations

import pytest
from mcp import Client
from sqlalchemy import Engine

from bot.config import Settings
from bot.mcp_server import build_server, local_caller
from playbook import db
from playbook.lessons import lifecycle
from tests.bot.test_mcp import run
from tests.support import saw

OLD = "Pin the v1 payments client to 1.4 because 1.5 breaks refunds"
NEW = "Use the v2 payments client because it handles refunds and retries"
SIMILAR = "Pin the v2 payments client to 2.0 because 1.5 breaks refunds and retries"


@pytest.fixture
def pair(engine: Engine) -> tuple[str, str]:
    with db.transaction(engine) as session:
        old = lifecycle.add(session, OLD, learned_from="PAY-1", actor="t").bullet.id
        new = lifecycle.add(session, NEW, learned_from="PAY-2", actor="t").bullet.id
    return old, new


def server(engine: Engine, database_url: str, **changes: object):
    settings = Settings(
        PLAYBOOK_DATABASE_URL=database_url, PLAYBOOK_ACTOR="mcp:tester", _env_file=None, **changes
    )
    return build_server(settings, lambda: engine, local_caller(settings))


def test_proposals_name_a_similar_lesson_and_no_tool_supersedes(
    engine: Engine, database_url: str, pair: tuple[str, str]
) -> None:
    old, new = pair

    async def session() -> None:
        async with Client(server(engine, database_url)) as client:
            names = {tool.name for tool in (await client.list_tools()).tools}
            assert not {name for name in names if "supersede" in name}
            similar = await client.call_tool(
                "propose_lesson", {"text": SIMILAR, "learned_from": "PAY-3"}
            )
            answer = similar.structured_content
            assert answer["created"] is True and answer["similar_to"]["id"] == old
            assert 0.5 <= answer["similar_to"]["overlap"] < 0.8
            unrelated = await client.call_tool(
                "propose_lesson", {"text": "Vendor the chart lib", "learned_from": "W-1"}
            )
            assert unrelated.structured_content["similar_to"] is None
            duplicate = await client.call_tool(
                "propose_lesson", {"text": OLD + " today", "learned_from": "PAY-4"}
            )
            assert duplicate.structured_content["duplicate_of"] == old
            assert duplicate.structured_content["similar_to"] is None

            with db.transaction(engine) as write:
                lifecycle.supersede(write, old, new, actor="maintainer")
            read = (await client.call_tool("get_lesson", {"id": old})).structured_content
            assert (read["status"], read["superseded_by"]) == ("superseded", new)
            replacement = (await client.call_tool("get_lesson", {"id": new})).structured_content
            assert replacement["supersedes"] == [old]
            found = await client.call_tool("search_lessons", {"query": "payments client refunds"})
            assert old not in [hit["id"] for hit in found.structured_content["lessons"]]

    run(session)


@pytest.mark.parametrize("credit", [False, True])
def test_record_usage_credits_the_replacement_only_when_set(
    engine: Engine, database_url: str, pair: tuple[str, str], credit: bool
) -> None:
    old, new = pair
    saw(engine, "PAY-7")
    with db.transaction(engine) as write:
        lifecycle.supersede(write, old, new, actor="maintainer")
    changes = {"PLAYBOOK_SUPERSEDED_CITES_COUNT_FOR_REPLACEMENT": credit}

    async def session() -> None:
        async with Client(server(engine, database_url, **changes)) as client:
            cite = {"ticket": "PAY-7", "lesson_ids": [old], "kind": "cited"}
            answer = (await client.call_tool("record_usage", cite)).structured_content
            assert answer["lesson_ids"] == [old]
            assert answer["recorded"] == (2 if credit else 1)

    run(session)
    with db.transaction(engine) as check:
        assert lifecycle.get(check, old).cites == 1
        assert lifecycle.get(check, new).cites == int(credit)

"""Supersession stays within a scope: no door links two owners' lessons, no reader sees one.

A lesson is superseded only by one of its own scope or a global one, and a global one only by
a global one. The API (409 naming ``by``), the CLI (a one-line error naming ``by``) and the
domain refuse the rest; MCP has no superseding tool. A link older than the rule (or imported)
is never shown to a token of the other scope: not in ``superseded_by``, not in revisions.
"""

from __future__ import annotations

import json

import pytest
from mcp import Client
from sqlalchemy import Engine, func, select

from bot.config import Settings
from bot.mcp_server import build_server, local_caller
from playbook.db import transaction
from playbook.errors import InvalidTransition
from playbook.lessons import fields, lifecycle, replacements
from playbook.models import Bullet, Revision
from tests.bot.test_mcp import run
from tests.support import saw

MAINTAINER = {"Authorization": "Bearer maintainer-token"}
ACME = {"Authorization": "Bearer acme-token"}  # an agent of acme/api
OURS, THEIRS = "acme/api", "victim/secret"
TEXTS = {
    "ours": "Pin the v1 payments client to 1.4 because 1.5 breaks refunds",
    "ours2": "Retry the ledger export twice before paging the on-call engineer",
    "theirs": "Rotate the payroll database password after every contractor leaves",
    "global": "Use the v2 payments client because it handles refunds and retries",
    "global2": "Vendor the chart library so offline builds keep working at night",
}


@pytest.fixture
def lessons(engine: Engine) -> dict[str, str]:
    scopes = {"ours": OURS, "ours2": OURS, "theirs": THEIRS, "global": "global"}
    scopes["global2"] = "global"
    with transaction(engine) as session:
        return {
            name: lifecycle.add(
                session, TEXTS[name], learned_from="PAY-1", actor="t", scope=scopes[name]
            ).bullet.id
            for name in TEXTS
        }


@pytest.fixture
def api(shared_app):
    tokens = {"api_token": "maintainer-token", "agent_tokens": f"claude@{OURS}:acme-token"}
    return shared_app(**tokens).test_client()


def _unchanged(engine: Engine) -> tuple[list[tuple[str, str, str | None]], int]:
    with transaction(engine) as session:
        rows = session.execute(select(Bullet.id, Bullet.status, Bullet.superseded_by)).all()
        return sorted(tuple(r) for r in rows), int(
            session.scalar(select(func.count()).select_from(Revision)) or 0
        )


# Each pair (lesson, replacement) that must be refused, and each that may be made.
REFUSED = [("ours", "theirs"), ("theirs", "ours"), ("global", "ours")]
ALLOWED = [("ours", "ours2"), ("ours", "global"), ("global", "global2")]


@pytest.mark.parametrize(("old", "new"), REFUSED)
def test_the_domain_refuses_a_replacement_of_another_scope(
    engine: Engine, lessons: dict[str, str], old: str, new: str
) -> None:
    before = _unchanged(engine)
    with transaction(engine) as session, pytest.raises(replacements.OtherScope) as refused:
        lifecycle.supersede(session, lessons[old], lessons[new], actor="t")
    assert refused.value.field == "by" and isinstance(refused.value, InvalidTransition)
    assert "own scope or a global one" in str(refused.value)
    assert _unchanged(engine) == before


@pytest.mark.parametrize(("old", "new"), ALLOWED)
def test_a_replacement_of_the_same_scope_or_global_is_made(
    engine: Engine, lessons: dict[str, str], old: str, new: str
) -> None:
    with transaction(engine) as session:
        change = lifecycle.supersede(session, lessons[old], lessons[new], actor="t")
        assert change.changed and change.bullet.superseded_by == lessons[new]


@pytest.mark.parametrize(("old", "new"), REFUSED)
def test_the_api_answers_409_naming_by(
    api, engine: Engine, lessons: dict[str, str], old: str, new: str
) -> None:
    before = _unchanged(engine)
    url = f"/api/v1/lessons/{lessons[old]}/supersede"
    answer = api.post(url, json={"by": lessons[new]}, headers=MAINTAINER)
    assert answer.status_code == 409, answer.text
    assert answer.mimetype == "application/problem+json"
    assert answer.get_json()["field"] == "by"
    assert _unchanged(engine) == before


def test_the_api_supersedes_within_a_scope(api, lessons: dict[str, str]) -> None:
    url = f"/api/v1/lessons/{lessons['ours']}/supersede"
    answer = api.post(url, json={"by": lessons["global"]}, headers=MAINTAINER)
    assert answer.status_code == 200, answer.text


@pytest.mark.parametrize(("old", "new"), REFUSED)
def test_the_cli_refuses_in_one_line_naming_by(
    cli, engine: Engine, lessons: dict[str, str], old: str, new: str
) -> None:
    before = _unchanged(engine)
    result = cli("supersede", lessons[old], "--by", lessons[new])
    assert result.exit_code != 0
    said = result.output.strip()
    assert len(said.splitlines()) == 1 and "Traceback" not in said, said
    assert "own scope or a global one" in said
    assert _unchanged(engine) == before


def test_a_linked_lesson_cannot_be_moved_out_of_its_scope(cli, lessons: dict[str, str]) -> None:
    done = cli("supersede", lessons["ours"], "--by", lessons["ours2"])
    assert done.exit_code == 0, done.output
    for moved in (lessons["ours"], lessons["ours2"]):
        result = cli("edit", moved, "--scope", THEIRS)
        assert result.exit_code != 0 and "scope" in result.output, result.output
        assert json.loads(cli("show", moved, "--json").stdout)["scope"] == OURS
    # Unlinked lessons still move.
    assert cli("edit", lessons["theirs"], "--scope", "victim/other").exit_code == 0


def _legacy_link(engine: Engine, lessons: dict[str, str]) -> tuple[str, str]:
    """acme's lesson superseded by one moved since to victim/secret, as before the rule (or an
    import) could leave it, with the victim's words in the reason."""
    old, new = lessons["ours"], lessons["ours2"]
    with transaction(engine) as session:
        lifecycle.supersede(session, old, new, actor="t", reason="VICTIMREASON payroll DB")
        session.get(Bullet, new).scope = THEIRS  # behind the rules' back
        # And a global lesson that replaced one of victim/secret's.
        theirs = session.get(Bullet, lessons["theirs"])
        theirs.status, theirs.superseded_by = "superseded", lessons["global"]
        session.add(
            Revision(
                bullet_id=lessons["global"],
                action="replace",
                actor="t",
                at=theirs.updated_at,
                reason=f"supersedes {theirs.id}: VICTIMREASON",
            )
        )
    return old, new


def test_a_scoped_token_never_reads_another_scopes_id(
    api, engine: Engine, lessons: dict[str, str]
) -> None:
    old, new = _legacy_link(engine, lessons)
    hidden = (new, lessons["theirs"], "VICTIMREASON")
    reads = [
        api.get(f"/api/v1/lessons/{old}", headers=ACME),
        api.get(f"/api/v1/lessons/{lessons['global']}", headers=ACME),
        api.get("/api/v1/lessons?status=superseded", headers=ACME),
        api.get("/api/v1/lessons", headers=ACME),
    ]
    for read in reads:
        assert read.status_code == 200, read.text
        assert not [word for word in hidden if word in read.text], read.text
    detail = reads[0].get_json()
    assert (detail["status"], detail["superseded_by"]) == ("superseded", None)
    assert [r["action"] for r in detail["revisions"]] == ["create"]
    # A maintainer, bound to no scope, reads the link as it is.
    full = api.get(f"/api/v1/lessons/{old}", headers=MAINTAINER).get_json()
    assert full["superseded_by"] == new and full["revisions"][0]["action"] == "supersede"


def test_mcp_has_no_superseding_tool_and_hides_the_link(
    engine: Engine, database_url: str, lessons: dict[str, str]
) -> None:
    old, new = _legacy_link(engine, lessons)
    settings = Settings(
        PLAYBOOK_DATABASE_URL=database_url,
        PLAYBOOK_ACTOR="mcp:tester",
        PLAYBOOK_AGENT_SCOPE=OURS,
        _env_file=None,
    )
    server = build_server(settings, lambda: engine, local_caller(settings))

    answers: list[object] = []

    async def session() -> None:
        async with Client(server) as client:
            names = {tool.name for tool in (await client.list_tools()).tools}
            assert not {name for name in names if "supersede" in name}
            read = await client.call_tool("get_lesson", {"id": old})
            assert read.structured_content["superseded_by"] is None
            shared = await client.call_tool("get_lesson", {"id": lessons["global"]})
            answers.extend([read.structured_content, shared.structured_content])

    run(session)  # fails, rather than hangs, if the session never ends
    said = json.dumps(answers)
    assert new not in said and lessons["theirs"] not in said and "VICTIMREASON" not in said


def test_the_field_names_a_moved_lesson_scope(engine: Engine, lessons: dict[str, str]) -> None:
    with transaction(engine) as session:
        lifecycle.supersede(session, lessons["ours"], lessons["ours2"], actor="t")
    with transaction(engine) as session, pytest.raises(fields.FieldProblem) as refused:
        lifecycle.edit(session, lessons["ours2"], actor="t", scope=THEIRS)
    assert refused.value.field == "scope"


def test_reverting_a_move_never_links_two_scopes(engine: Engine, lessons: dict[str, str]) -> None:
    """A lesson moved from victim/secret to acme/api, then made the replacement of one of
    acme/api's: undoing the move would leave acme/api's lesson pointing into victim/secret."""
    moved, replaced = lessons["theirs"], lessons["ours"]
    with transaction(engine) as session:
        edit = lifecycle.edit(session, moved, actor="t", scope=OURS).revision
        lifecycle.supersede(session, replaced, moved, actor="t")
    before = _unchanged(engine)
    with transaction(engine) as session, pytest.raises(fields.FieldProblem) as refused:
        lifecycle.revert(session, moved, edit.id, actor="t")
    assert refused.value.field == "scope" and replaced in str(refused.value)
    assert _unchanged(engine) == before


def test_a_cite_never_counts_for_another_scopes_replacement(
    shared_app, engine: Engine, lessons: dict[str, str]
) -> None:
    """With cites counting for replacements, a cross-scope link is still not followed."""
    old, new = _legacy_link(engine, lessons)
    # An agent bound to no scope: the link itself is what is not followed.
    tokens = {"api_token": "maintainer-token", "agent_tokens": "bot:plain-token"}
    api = shared_app(**tokens, superseded_cites_count_for_replacement=True).test_client()
    saw(engine, "PAY-7")
    cite = {"event": "cited", "lessonIds": [old], "ticketId": "PAY-7"}
    answer = api.post("/api/v1/usage", json=cite, headers={"Authorization": "Bearer plain-token"})
    assert answer.status_code == 201 and answer.get_json()["events"] == 1
    with transaction(engine) as session:
        assert (session.get(Bullet, old).cites, session.get(Bullet, new).cites) == (1, 0)

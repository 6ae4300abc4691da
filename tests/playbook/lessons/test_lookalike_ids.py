"""Ids are ASCII: an id written with another script's digits is no id, wherever ids are read."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import given
from hypothesis import strategies as st
from sqlalchemy import Engine, select

from bot.config import Settings
from bot.mcp_server import build_server, local_caller
from playbook.db import transaction
from playbook.deliveries import inbox
from playbook.errors import InvalidInput
from playbook.lessons import checks, ids, lifecycle
from playbook.lessons.capture import commands_in
from playbook.lessons.fields import FieldProblem
from playbook.models import Bullet, UsageEvent
from playbook.outcomes.links import bullet_ids, pull_request_links
from tests.loop_harness import REPO, Loop
from tests.payloads import pull_request
from tests.support import put
from webhooks import create_app

ARABIC_ZERO, FULL_ONE, BOLD_ONE = "\u0660", "\uff11", "\U0001d7cf"
# Each reads as an id it is not: pb-1 followed by an Arabic-Indic zero reads as "pb-1" and
# int() makes it 10; a full-width or mathematical bold 1 reads as pb-1.
LOOKALIKES = [f"pb-1{ARABIC_ZERO}", f"pb-{FULL_ONE}", f"pb-{BOLD_ONE}", "pb-\u0967", "pb-1\u200b"]
# Any decimal digit outside ASCII in the Unicode database of this Python (hypothesis reads the
# database once; a list of them built here cost every pytest run's collection a scan of it).
OTHER_DIGITS = st.characters(categories=["Nd"], min_codepoint=0x80)


@pytest.mark.parametrize("lookalike", LOOKALIKES[:4])
def test_a_lookalike_in_prose_is_no_cite(lookalike: str) -> None:
    text = f"Applied [{lookalike}] and {lookalike.upper()}, see {lookalike}."
    assert bullet_ids(text) == []
    assert bullet_ids(f"{text} Also pb-7.") == ["pb-7"]


def test_ascii_ids_are_still_found_and_normalised() -> None:
    assert bullet_ids("[PB-012], pb-3 (pb-3) and xpb-4 pb-5x") == ["pb-12", "pb-3"]


def test_issue_numbers_in_other_digits_close_nothing() -> None:
    links = pull_request_links("t", "b", f"Fixes #{FULL_ONE}2 and closes #1{ARABIC_ZERO}", REPO)
    assert links.closes == ()
    assert pull_request_links("t", "b", "Fixes #12", REPO).closes == (f"{REPO}#12",)


@given(
    st.lists(
        st.one_of(
            st.sampled_from(["pb-", "PB-", " ", "[", "]", "0", "1", "9", "x", ",", "-"]),
            OTHER_DIGITS,
        ),
        max_size=40,
    ).map("".join)
)
def test_the_parser_yields_only_ids_written_in_ascii_digits(text: str) -> None:
    for found in ids.mentioned(text):
        number = found.removeprefix("pb-")
        assert number.isascii() and number.isdigit()
        # The id is in the text with these very digits (leading zeros aside), in ASCII.
        assert re.search(rf"(?i:pb)-0*{number}(?![0-9])", text), (text, found)


@given(OTHER_DIGITS, st.text(alphabet="0123456789", max_size=3))
def test_an_id_with_any_other_digit_is_never_an_id(digit: str, ascii_digits: str) -> None:
    for text in (f"pb-{digit}{ascii_digits}", f"pb-{ascii_digits}{digit}", f"pb-{digit}"):
        assert ids.mentioned(text) == []
        assert not ids.is_numbered(text)
        assert ids.canonical_number(text) is None
        assert ids.number(text.removeprefix("pb-")) is None
        with pytest.raises(FieldProblem) as refused:
            checks.check_fields({"id": text})
        assert refused.value.field == "id"


def test_playbook_commands_with_a_lookalike_id_are_malformed() -> None:
    for lookalike in LOOKALIKES:
        [command] = commands_in(f"/playbook approve {lookalike}")
        assert command.problem is not None and command.bullet_id is None


@pytest.fixture
def two(engine: Engine) -> None:
    """pb-1 and pb-10, the lessons a look-alike id would land on."""
    with transaction(engine) as session:
        for n in range(1, 11):
            lifecycle.add(
                session, f"Lesson number {n} about topic{n} alone", learned_from="CTMS-1", actor="t"
            )


def counts(engine: Engine) -> dict[str, int]:
    with transaction(engine) as session:
        rows = session.execute(select(UsageEvent.bullet_id)).scalars().all()
    return {bullet_id: rows.count(bullet_id) for bullet_id in set(rows)}


@pytest.mark.parametrize("lookalike", LOOKALIKES)
def test_api_refuses_lookalike_ids_by_name(api: Any, engine: Engine, two: None, lookalike: str):
    headers = {"Authorization": "Bearer agent"}
    for path in (f"/api/v1/lessons/{lookalike}", f"/api/v1/bullets/{lookalike}"):
        answer = api.get(path, headers=headers)
        assert answer.status_code == 404, path
        assert answer.get_json()["field"] == "id"
    approve = api.post(
        f"/api/v1/lessons/{lookalike}/approve",
        json={},
        headers={"Authorization": "Bearer maintainer-token"},
    )
    assert approve.status_code == 404
    event = {"event": "cited", "lessonIds": [lookalike], "ticketId": "CTMS-9"}
    answer = api.post("/api/v1/usage", json=event, headers=headers)
    assert answer.status_code in (400, 404)
    assert answer.get_json()["field"] == "lessonIds"
    assert counts(engine) == {}


def test_mcp_refuses_lookalike_ids(engine: Engine, two: None) -> None:
    settings = Settings(_env_file=None)
    server = build_server(settings, lambda: engine, local_caller(settings))
    from mcp import Client

    async def session() -> None:
        async with Client(server) as client:
            for lookalike in LOOKALIKES:
                got = await client.call_tool("get_lesson", {"id": lookalike})
                assert got.is_error, lookalike
                assert "id: " in got.content[0].text and "ids are ASCII" in got.content[0].text
                used = await client.call_tool(
                    "record_usage",
                    {"ticket": "CTMS-9", "lesson_ids": [lookalike], "kind": "cited"},
                )
                assert used.is_error and "ids are ASCII" in used.content[0].text, lookalike

    anyio.run(session)
    assert counts(engine) == {}


def test_cli_refuses_lookalike_ids(cli: Any, engine: Engine, two: None, tmp_path: Path) -> None:
    for lookalike in LOOKALIKES:
        for args in (("show", lookalike), ("approve", lookalike), ("history", lookalike)):
            result = cli(*args)
            assert result.exit_code != 0, args
            assert "id" in result.stderr and "Lesson number 1 " not in result.output
        result = cli("usage", "record", "cited", "--ids", lookalike, "--ticket", "CTMS-9")
        assert result.exit_code != 0
    # A revision id is an id too: click's int() would read a full-width 1 as revision 1.
    reverted = cli("revert", "pb-1", FULL_ONE)
    assert reverted.exit_code == 2 and "is not a revision number" in reverted.stderr
    assert cli("history", "pb-1", "--json").stdout.count('"action"') == 1
    path = tmp_path / "lessons.json"
    path.write_text(
        json.dumps([{"id": f"pb-{FULL_ONE}", "text": "A lesson", "learned_from": "CTMS-1"}]),
        encoding="utf-8",
    )
    refused = cli("import", str(path))
    assert refused.exit_code != 0 and "id:" in refused.output and "ASCII" in refused.output
    assert counts(engine) == {}
    with transaction(engine) as session:
        assert session.scalar(select(Bullet.text).where(Bullet.id == "pb-1")).startswith(
            "Lesson number 1 "
        )


def test_ui_lookalike_ids_and_numbers_are_not_found(engine: Engine, settings: Any, two: None):
    client = create_app(
        settings.model_copy(update={"api_token": "ui-token", "ui_public_read": True}),
        engine=engine,
    ).test_client()
    for lookalike in LOOKALIKES:
        assert client.get(f"/ui/lessons/{lookalike}").status_code == 404
    assert client.get(f"/ui/?page={FULL_ONE}").status_code == 400


def test_a_delivery_is_not_found_by_a_lookalike_row_id(engine: Engine) -> None:
    row = put(engine, "issues.opened")
    with transaction(engine) as session:
        assert inbox.get(session, str(row)).id == row
        lookalike = "".join(chr(0xFF10 + int(d)) for d in str(row))  # full-width digits
        with pytest.raises(InvalidInput):
            inbox.get(session, lookalike)


def test_a_pr_citing_lookalike_ids_cites_nothing(loop: Loop, engine: Engine, two: None) -> None:
    body = f"Fixes CTMS-4337. Applied [pb-1{ARABIC_ZERO}], pb-{FULL_ONE} and pb-{BOLD_ONE}."
    loop.github_event("pull_request.opened", pull_request("opened", body=body))
    loop.process()
    assert counts(loop.engine) == {}
    loop.github_event("pull_request.edited", pull_request("edited", body=body + " Also [pb-10]."))
    loop.process()
    assert counts(loop.engine) == {"pb-10": 1}

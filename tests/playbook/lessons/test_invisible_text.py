"""Lesson text reads as it is written: no direction overrides or invisible characters get in,
whichever door the text comes through, and right-to-left lessons are isolated when shown."""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import given
from hypothesis import strategies as st
from sqlalchemy import Engine, update

from bot.config import Settings
from bot.mcp_server import build_server, local_caller
from bot.render import lessons_comment
from playbook.db import transaction
from playbook.lessons import bulk, characters, lifecycle
from playbook.lessons.capture import commands_in, lessons_in
from playbook.lessons.fields import FieldProblem
from playbook.models import Bullet
from playbook.version import playbook_version
from tests.hostile_texts import invisible
from tests.loop_harness import REPO, Loop
from tests.payloads import issue_comment, pull_request
from tests.support import hang_guard, hit
from webhooks import create_app

RLO, LRO, PDF = "\u202e", "\u202d", "\u202c"
ZWSP, ZWNJ, ZWJ = "\u200b", "\u200c", "\u200d"
FSI, PDI = "\u2068", "\u2069"
# "Never retry" written so that it displays as "Always retry ...": a right-to-left override
# reverses what follows it on screen, and the zero-width spaces hide in the words.
TRICK = f"Never{ZWSP} retry{RLO} the payment{PDF} call\u2066 twice\u2069 without a key{ZWJ}1\ufeff"
TRICK_CLEAN = "Never retry the payment call twice without a key1"
HEBREW = "אל תנסה שוב קריאת תשלום בלי מפתח אידמפוטנטיות"
ARABIC = "لا تُعِد محاولة استدعاء الدفع دون مفتاح عدم التكرار"
PERSIAN = f"می{ZWNJ}خواهم کلید را بنویسم"  # the non-joiner belongs in this word
EMOJI = f"Ship it 👩{ZWJ}💻 after review"  # one emoji: woman technologist
DEVANAGARI = f"क्{ZWJ}ष परीक्षण"  # a conjunct's explicit half form
ONLY_INVISIBLE = f"{RLO}{ZWSP * 20}\u2066\u2069\ufeff{ZWJ}"


# -- the rule ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (TRICK, TRICK_CLEAN),
        ("tab\tand\nnewline stay", "tab\tand\nnewline stay"),
        ("windows\r\nline\rends", "windows\nline\nends"),
        ("bell\x07 escape\x1b[31m red\x7f c1\x85\x9b", "bell escape[31m red c1"),
        ("soft\u00adhyphen and word\u2060joiner", "softhyphen and wordjoiner"),
        ("marks \u200eleft\u200f right \u061calm", "marks left right alm"),
        ("tags \U000e0041\U000e0042 hidden \U000e007f", "tags  hidden "),
        # A joiner or non-joiner inside an ASCII word, or next to a digit, hides a break.
        (f"pb-1{ZWJ}2 re{ZWNJ}try {ZWJ}x", "pb-12 retry x"),
        (PERSIAN, PERSIAN),
        (EMOJI, EMOJI),
        (DEVANAGARI, DEVANAGARI),
        (f"{ZWJ}{ZWJ}ש{ZWJ}{ZWJ}ש", "שש"),
        # NFC: e + combining acute is é.
        ("cafe\u0301", "café"),
    ],
)
def test_visible_drops_what_changes_the_reading_and_keeps_the_rest(text: str, expected: str):
    assert characters.visible(text) == expected


def test_arabic_and_hebrew_survive_unchanged_but_for_nfc() -> None:
    for text in (HEBREW, ARABIC, PERSIAN, "שָׁלוֹם", "مَرْحَبًا"):
        assert characters.visible(text) == unicodedata.normalize("NFC", text)
    decomposed = unicodedata.normalize("NFD", "שָׁלוֹם עולם")
    assert characters.visible(decomposed) == unicodedata.normalize("NFC", decomposed)


def test_every_format_character_is_dropped_or_kept_on_purpose() -> None:
    # Guards the listed ranges against a Python whose Unicode database has new ones.
    for code in range(0x110000):
        char = chr(code)
        category = unicodedata.category(char)
        if category == "Cf":
            kept = code in characters.KEPT_FORMAT or char in characters.JOINERS
            assert kept != characters.dropped(char), f"U+{code:04X}"
        elif category == "Cc":
            assert characters.dropped(char) == (char not in "\t\n\r"), f"U+{code:04X}"


@given(st.text())
def test_visible_text_holds_nothing_it_drops_and_is_a_fixed_point(text: str) -> None:
    shown = characters.visible(text)
    assert characters.visible(shown) == shown
    assert unicodedata.is_normalized("NFC", shown)
    assert not any(characters.dropped(char) for char in shown)
    assert "\r" not in shown


# 200,000 characters take well under a second when the scan is linear, and minutes when it
# backtracks: the guard only stops such a hang (bench/hostile_text.py times them).
HANG_SECONDS = 10


# What `visible` makes of each run of tests.hostile_texts.invisible.
SHOWN: dict[str, Callable[[str], str]] = {
    "joiners": lambda text: "",  # a joiner joins nothing here
    "latin joined": lambda text: text.replace(ZWJ, ""),  # nor between ASCII letters
    "hebrew joined": lambda text: text[:-1],  # between Hebrew letters it stays, not at the end
    "overrides": lambda text: "",
    "hebrew non-joined": lambda text: text[1:],  # nor at the start
    "hebrew": lambda text: text,
}


@pytest.mark.parametrize("name", list(SHOWN))
def test_visible_scans_hostile_text_without_backtracking(name: str) -> None:
    text = invisible()[name]
    with hang_guard(HANG_SECONDS, "showing a hostile text"):
        assert characters.visible(text) == SHOWN[name](text)


# -- the doors: domain, API, MCP, CLI, /ui, PR bodies and comments ------------------------------


def stored(engine: Engine, bullet_id: str) -> Bullet:
    with transaction(engine) as session:
        bullet = session.get(Bullet, bullet_id)
        assert bullet is not None
        session.expunge(bullet)
        return bullet


def test_add_edit_import_and_revert_store_visible_text(engine: Engine) -> None:
    with transaction(engine) as session:
        added = lifecycle.add(session, TRICK, learned_from=f"CTMS-1{ZWSP}", actor="t").bullet
        assert (added.text, added.learned_from) == (TRICK_CLEAN, "CTMS-1")
        lifecycle.edit(session, added.id, actor="t", text=f"{RLO}{HEBREW}")
        assert added.text == HEBREW
        [put] = bulk.put_many(
            session, [{"id": "team-7", "text": f"{ARABIC}{LRO}", "tags": [f"x{ZWSP}y"]}], actor="t"
        )
        assert put.values["text"] == ARABIC and put.values["tags"] == ["xy"]
    # A row written before the rule (straight into the table) is cleaned by a revert too.
    with transaction(engine) as session:
        session.execute(update(Bullet).where(Bullet.id == added.id).values(text=f"old{RLO} text"))
        lifecycle.edit(session, added.id, actor="t", text="A new text for the lesson")
        first = lifecycle.history(session, added.id)[-1]
        lifecycle.revert(session, added.id, first.id, actor="t")
    assert stored(engine, added.id).text == "old text"


@pytest.mark.parametrize("field", ["text", "learned_from", "scope"])
def test_a_value_of_only_invisible_characters_is_refused_by_name(engine: Engine, field: str):
    values = {"text": "A lesson with words", "learned_from": "CTMS-1", "scope": "global"}
    values[field] = ONLY_INVISIBLE
    with transaction(engine) as session, pytest.raises(FieldProblem) as refused:
        lifecycle.add(session, values.pop("text"), actor="t", **values)
    assert refused.value.field == field
    assert "invisible" in str(refused.value)


def test_api_propose_stores_visible_text_and_names_an_invisible_one(api: Any, engine: Engine):
    headers = {"Authorization": "Bearer agent"}
    answer = api.post(
        "/api/v1/lessons", json={"text": TRICK, "learned_from": "CTMS-1"}, headers=headers
    )
    assert answer.status_code == 201, answer.text
    lesson = answer.get_json()["lesson"]
    assert lesson["text"] == TRICK_CLEAN
    assert stored(engine, lesson["id"]).text == TRICK_CLEAN
    empty = api.post(
        "/api/v1/lessons", json={"text": ONLY_INVISIBLE, "learned_from": "CTMS-1"}, headers=headers
    )
    # Refused by the schema itself (OpenAPI's pattern says what the rule drops), naming the field.
    assert empty.status_code == 400
    assert empty.get_json()["field"] == "text"
    hebrew = api.post(
        "/api/v1/lessons", json={"text": HEBREW, "learned_from": "CTMS-2"}, headers=headers
    )
    assert hebrew.get_json()["lesson"]["text"] == HEBREW


def test_mcp_propose_lesson_stores_visible_text(engine: Engine) -> None:
    settings = Settings(_env_file=None)
    server = build_server(settings, lambda: engine, local_caller(settings))
    from mcp import Client

    async def session() -> None:
        async with Client(server) as client:
            made = await client.call_tool(
                "propose_lesson", {"text": TRICK, "learned_from": "CTMS-3"}
            )
            assert not made.is_error, made
            assert made.structured_content["lesson"]["text"] == TRICK_CLEAN
            refused = await client.call_tool(
                "propose_lesson", {"text": ONLY_INVISIBLE, "learned_from": "CTMS-3"}
            )
            assert refused.is_error
            message = " ".join(block.text for block in refused.content)
            assert "text" in message and "invisible" in message

    anyio.run(session)
    with transaction(engine) as check:
        texts = [b.text for b in check.query(Bullet)]
    assert texts == [TRICK_CLEAN]


def test_cli_add_edit_and_import_store_visible_text(cli: Any, engine: Engine, tmp_path: Path):
    assert cli("add", TRICK, "--learned-from", "CTMS-4").exit_code == 0
    assert stored(engine, "pb-1").text == TRICK_CLEAN
    assert cli("edit", "pb-1", "--text", f"{HEBREW}{RLO}").exit_code == 0
    assert stored(engine, "pb-1").text == HEBREW
    refused = cli("edit", "pb-1", "--text", ONLY_INVISIBLE)
    assert refused.exit_code != 0 and "text" in refused.stderr and "invisible" in refused.stderr
    assert stored(engine, "pb-1").text == HEBREW
    entries = [{"id": "team-1", "text": f"{ARABIC}{ZWSP}", "learned_from": f"CTMS-5{RLO}"}]
    path = tmp_path / "lessons.json"
    path.write_text(json.dumps(entries), encoding="utf-8")
    assert cli("import", str(path)).exit_code == 0
    imported = stored(engine, "team-1")
    assert (imported.text, imported.learned_from) == (ARABIC, "CTMS-5")
    entries = [{"id": "team-2", "text": ONLY_INVISIBLE, "learned_from": "CTMS-5"}]
    path.write_text(json.dumps(entries), encoding="utf-8")
    refused = cli("import", str(path))
    assert refused.exit_code != 0 and "text: holds only invisible" in refused.output


def _ui(engine: Engine, settings: Any) -> Any:
    client = create_app(
        settings.model_copy(update={"api_token": "ui-token", "ui_public_read": True}),
        engine=engine,
    ).test_client()
    token = re.search(r'name="csrf_token" value="([^"]+)"', client.get("/ui/login").text)
    assert token
    client.post("/ui/login", data={"token": "ui-token", "name": "c", "csrf_token": token[1]})
    return client


def test_ui_edit_stores_visible_text_and_pages_isolate_lessons(engine: Engine, settings: Any):
    with transaction(engine) as session:
        bullet_id = lifecycle.add(session, HEBREW, learned_from="CTMS-6", actor="t").bullet.id
    client = _ui(engine, settings)
    page = client.get(f"/ui/lessons/{bullet_id}/edit").text
    token = re.search(r'name="csrf_token" value="([^"]+)"', page)
    assert token
    form = {"csrf_token": token[1], "text": f"{ARABIC}{RLO}\r\n", "scope": "global"}
    answer = client.post(f"/ui/lessons/{bullet_id}/edit", data={**form, "learned_from": "CTMS-6"})
    assert answer.status_code == 302, answer.text
    assert stored(engine, bullet_id).text == ARABIC
    # A row from before the rule: the page shows it without the override, in an isolate.
    with transaction(engine) as session:
        session.execute(update(Bullet).where(Bullet.id == bullet_id).values(text=TRICK))
    for path in (f"/ui/lessons/{bullet_id}", "/ui/", "/ui/proposals"):
        html = client.get(path).text
        assert RLO not in html and ZWSP not in html and "\u2066" not in html, path
    lesson_page = client.get(f"/ui/lessons/{bullet_id}").text
    assert f'<p class="lesson-text big" dir="auto">{TRICK_CLEAN}</p>' in lesson_page
    assert f"<bdi>{TRICK_CLEAN}</bdi>" in client.get("/ui/").text


def test_pr_lessons_and_lesson_commands_store_visible_text(loop: Loop) -> None:
    body = f"Fixes CTMS-4337.\n\n## Lessons\n- {TRICK}\n- {ZWSP * 30}\n- {RLO}{HEBREW}{PDF}\n"
    loop.github_event("pull_request.opened", pull_request("opened", body=body))
    loop.process()
    with transaction(loop.engine) as session:
        texts = [b.text for b in session.query(Bullet).order_by(Bullet.number)]
    assert texts == [TRICK_CLEAN, HEBREW]  # the invisible item is no lesson

    loop.github.add_issue(REPO, 1, "Spelling error")
    loop.github.permissions[(REPO, "maintainer")] = "write"
    command = f"/lesson Run{ZWSP} codespell{RLO} in CI before merging docs\n/lesson {ZWSP * 20}"
    loop.github_event("issue_comment.created", issue_comment(command, "maintainer"))
    loop.process()
    with transaction(loop.engine) as session:
        texts = [b.text for b in session.query(Bullet).order_by(Bullet.number)]
    assert texts[-1] == "Run codespell in CI before merging docs"
    [reply] = loop.github.comments_on(REPO, 1)
    assert "write the lesson after /lesson" in reply["body"]


def test_commands_and_sections_measure_lessons_as_they_read() -> None:
    assert lessons_in(f"## Lessons\n- {ZWSP * 40}\n- {TRICK}\n") == [TRICK_CLEAN]
    [command] = commands_in(f"/lesson {RLO * 30}")
    assert command.problem == "write the lesson after /lesson"


# -- rendering ----------------------------------------------------------------------------------


@pytest.mark.parametrize("markup", ["github", "jira"])
def test_right_to_left_lessons_are_isolated_and_english_ones_untouched(markup: str) -> None:
    english, _ = lessons_comment([hit("Retry with a key")], markup=markup, max_chars=5000)
    assert FSI not in english and PDI not in english
    assert "Retry with a key" in english
    comment, _ = lessons_comment([hit(HEBREW), hit(ARABIC)], markup=markup, max_chars=5000)
    assert f"{FSI}{HEBREW}{PDI}" in comment and f"{FSI}{ARABIC}{PDI}" in comment
    # Every isolate is closed, so the id and notes after a lesson keep their order.
    assert comment.count(FSI) == comment.count(PDI) == 2


@pytest.mark.parametrize("markup", ["github", "jira"])
def test_comments_drop_overrides_from_rows_written_before_the_rule(markup: str) -> None:
    comment, _ = lessons_comment(
        [hit(f"{TRICK} @octocat", learned_from=f"CTMS-1{RLO}")], markup=markup, max_chars=5000
    )
    for char in (RLO, PDF, "\u2066", "\ufeff"):
        assert char not in comment
    assert "Never retry" in comment
    if markup == "github":
        assert "@\u200boctocat" in comment  # the mention is still defused


def test_a_shortened_right_to_left_lesson_keeps_its_isolate_closed() -> None:
    comment, _ = lessons_comment([hit(HEBREW * 40)], markup="github", max_chars=800)
    start = comment.index(FSI)
    assert comment.index(PDI) > start and comment.count(PDI) == 1
    assert len(comment) <= 800


def test_the_migration_makes_rows_stored_before_the_rule_visible(engine: Engine) -> None:
    from alembic import command

    from playbook import db

    with transaction(engine) as session:
        english = lifecycle.add(session, "Plain English stays", learned_from="A-1", actor="t")
        dirty = lifecycle.add(session, "Placeholder lesson text", learned_from="A-2", actor="t")
        session.execute(
            update(Bullet)
            .where(Bullet.id == dirty.bullet.id)
            .values(text=TRICK, learned_from=f"A-2{RLO}", tags=[f"x{ZWSP}", "x"])
        )
        before = playbook_version(session)
    command.downgrade(db.alembic_config(engine), "0007")
    try:
        db.upgrade(engine)
    finally:
        assert db.current_revision(engine) == db.SCHEMA_HEAD
    cleaned = stored(engine, dirty.bullet.id)
    assert (cleaned.text, cleaned.learned_from, cleaned.tags) == (TRICK_CLEAN, "A-2", ["x"])
    assert cleaned.version > before  # search indexes read the changed lesson again
    assert stored(engine, english.bullet.id).version <= before

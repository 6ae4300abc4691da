"""Outside text never reaches a log line or a terminal raw: no forged line, no escape sequence.

A settings file's key, an error's message, a delivery's header and a lesson stored straight to
SQL carry escape sequences, a carriage return, a newline followed by a forged log line, a bidi
override and a C1 control. They go through the real log handler (as `serve` configures it)
and through the CLI as a terminal sees it (click's ANSI stripping off, as on a tty).
"""

from __future__ import annotations

import io
import json
import logging
import re
import sys
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any
from unittest.mock import patch

import pytest
from click.testing import CliRunner, Result
from sqlalchemy import Engine, update

from bot.escapes import escaped, json_text, terminal, traceback_text
from bot.logs import configure_logging
from playbook.db import transaction
from playbook.deliveries import inbox
from playbook.lessons import lifecycle
from playbook.models import Bullet, Delivery, RepoSettingsRow
from playbook.repos.settings import FILE_PATH
from tests.e2e.test_repo_settings import open_issue
from tests.loop_harness import Loop
from tests.payloads import REPO

FORGED = "1999-12-31 23:59:59,000 CRITICAL forged line"
# Clear the screen, retitle the window, return the carriage, start a forged record, reverse
# the text's direction, and a C1 CSI (what ESC [ is in one byte).
HOSTILE = f"\x1b[2J\x1b]0;title\x07\r\n{FORGED}\u202e\x9b"
# In a YAML double-quoted key: \e is ESC, \a is BEL.
HOSTILE_YAML = '"k\\e[2J\\e]0;title\\a\\r\\n' + FORGED + '\\u202e\\x9b"'
# Every character no terminal or log line should receive raw from a value.
RAW = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069]")


def no_raw_control(text: str) -> None:
    """No control, bidi or line-separator character, but the newlines and tabs of layout."""
    found = RAW.search(text)
    assert found is None, f"raw {found.group()!r} in {text[max(0, found.start() - 60) :]!r}"


def forged_lines(text: str) -> list[str]:
    """Lines that start with the forged record: each is a line the attacker made."""
    return [line for line in text.splitlines() if line.startswith(FORGED[:19])]


@contextmanager
def real_log(fmt: str, secrets: tuple[str, ...] = ()) -> Iterator[io.StringIO]:
    """The process's log as `serve` writes it (the production handler and formatter), into a
    buffer that stands for stderr."""
    root = logging.getLogger()
    saved = (root.handlers[:], root.level)
    stream = io.StringIO()
    with patch.object(sys, "stderr", stream):
        configure_logging("INFO", fmt, secrets)
    try:
        yield stream
    finally:
        root.handlers[:] = saved[0]
        root.setLevel(saved[1])


@pytest.fixture
def log_text() -> Iterator[Callable[[], str]]:
    """What the text log holds so far."""
    with real_log("text") as stream:
        yield stream.getvalue


@pytest.fixture
def terminal_cli(cli: Any) -> Callable[..., Result]:
    """`playbook-bot ARGS` as a terminal receives it: click does not strip ANSI for a tty, so
    nothing but our own escaping stands between a value and the terminal."""
    from bot.cli import main

    def run(*args: str) -> Result:
        return CliRunner().invoke(main, list(args), catch_exceptions=False, color=True)

    return run


# --- the rule --------------------------------------------------------------------------------


def test_a_value_is_one_visible_line_and_layout_keeps_only_its_newlines_and_tabs() -> None:
    assert escaped(HOSTILE) == (
        f"\\x1b[2J\\x1b]0;title\\x07\\r\\n{FORGED}\\u202e\\x9b"
    )  # fmt: skip
    assert escaped("tab\there") == "tab\\there"
    assert escaped("pb-12 ü 漢字 ✓") == "pb-12 ü 漢字 ✓"  # printable text stays as it is
    assert terminal(f"ours\n\tindented {HOSTILE}") == (
        f"ours\n\tindented \\x1b[2J\\x1b]0;title\\x07\\r\n{FORGED}\\u202e\\x9b"
    )
    # Still the same JSON value, with nothing raw a terminal would obey.
    text = json.dumps({"k": HOSTILE + "\U000e0001"}, ensure_ascii=False)
    assert json.loads(json_text(text)) == {"k": HOSTILE + "\U000e0001"}
    no_raw_control(json_text(text))


def test_an_exception_message_stays_on_its_own_line_in_a_traceback() -> None:
    try:
        try:
            raise KeyError(HOSTILE)
        except KeyError as error:
            raise ValueError(HOSTILE) from error
    except ValueError as error:
        text = traceback_text(type(error), error, error.__traceback__)
    no_raw_control(text)
    assert forged_lines(text) == []
    lines = text.splitlines()
    assert lines[0] == "Traceback (most recent call last):"
    assert "The above exception was the direct cause of the following exception:" in lines
    assert lines[-1].startswith("ValueError: \\x1b[2J") and lines[-1].endswith(
        f"{FORGED}\\u202e\\x9b"
    )
    assert any(line.startswith("KeyError: ") and FORGED in line for line in lines)


# --- the server log --------------------------------------------------------------------------


def test_a_settings_key_cannot_forge_a_log_line_or_drive_the_terminal(
    loop: Loop, log_text: Callable[[], str]
) -> None:
    loop.github.put_file(REPO, FILE_PATH, f"{HOSTILE_YAML}: 1\ncomment: false\n".encode())
    open_issue(loop, "Flaky login test")
    log = log_text()
    assert FORGED in log, log  # the bot did log the problem, naming the key
    no_raw_control(log)
    assert forged_lines(log) == []
    [line] = [line for line in log.splitlines() if FORGED in line]
    assert re.match(r"\d{4}-\d\d-\d\d [\d:,]+ WARNING bot\.repo_settings \[", line), line
    assert "k\\x1b[2J\\x1b]0;title\\x07\\r\\n" in line


def test_a_logged_exception_and_the_delivery_id_stay_on_their_lines(
    log_text: Callable[[], str],
) -> None:
    from bot.logs import delivery_context

    log = logging.getLogger("bot.worker")
    with delivery_context(f"guid{HOSTILE}"):
        try:
            raise RuntimeError(f"GitHub answered {HOSTILE}")
        except RuntimeError:
            log.exception("delivery failed: %s", HOSTILE)
    text = log_text()
    no_raw_control(text)
    assert forged_lines(text) == []
    first, *traceback, last = text.splitlines()
    assert first.endswith(f"[guid{escaped(HOSTILE)}] delivery failed: {escaped(HOSTILE)}")
    assert traceback[0] == "Traceback (most recent call last):"
    assert last == f"RuntimeError: GitHub answered {escaped(HOSTILE)}"


def test_a_record_holding_a_credential_keeps_its_traceback_masked_and_escaped(
    log_text: Callable[[], str],
) -> None:
    # Masking copies the record; the copy's traceback must survive the one-line formatter.
    token = "ghp_" + "Zx9Yw8Vu7Ts6Rq5Po4Nm3Lk2Ji1Hg0Fe9Dc8Ba7"
    try:
        raise RuntimeError(f"GitHub answered {HOSTILE}")
    except RuntimeError:
        logging.getLogger("bot.worker").exception("failed with %s", token)
    text = log_text()
    no_raw_control(text)
    assert token not in text and "[credential removed]" in text
    _first, *traceback, last = text.splitlines()
    assert traceback[0] == "Traceback (most recent call last):"
    assert last.startswith("RuntimeError: GitHub answered")


def test_the_json_log_keeps_every_record_on_one_line() -> None:
    with real_log("json") as stream:
        try:
            raise RuntimeError(HOSTILE)
        except RuntimeError:
            logging.getLogger("bot.worker").exception("failed: %s", HOSTILE)
    [line] = stream.getvalue().splitlines()
    no_raw_control(line)
    record = json.loads(line)
    assert record["message"] == f"failed: {HOSTILE}"  # the same text, once decoded
    assert HOSTILE in record["exc_info"]


# --- the terminal ----------------------------------------------------------------------------


def test_doctor_and_config_show_a_hostile_settings_key_escaped_on_its_line(
    terminal_cli: Callable[..., Result], engine: Engine
) -> None:
    problem = {"file": FILE_PATH, "key": HOSTILE, "line": 1, "message": "is not a setting"}
    with transaction(engine) as session:
        session.add(RepoSettingsRow(repo=REPO, problems=[problem], error=f"GitHub: {HOSTILE}"))
    doctor = terminal_cli("doctor")
    no_raw_control(doctor.output)
    assert forged_lines(doctor.output) == []
    [line] = [line for line in doctor.output.splitlines() if "repository settings" in line]
    # Doctor folds a problem's whitespace to one space; the rest is escaped, on this line.
    assert f"{FILE_PATH}:1: \\x1b[2J\\x1b]0;title\\x07 {FORGED}\\u202e\\x9b: is not" in line

    config = terminal_cli("config", "--repo", REPO, "--cached")
    no_raw_control(config.output)
    assert forged_lines(config.output) == []
    assert f"  {FILE_PATH}:1: {escaped(HOSTILE)}: is not a setting" in config.output
    assert f"Not read: GitHub: {escaped(HOSTILE)} (the" in config.output


def test_deliveries_list_and_show_escape_what_a_sender_wrote(
    terminal_cli: Callable[..., Result], engine: Engine
) -> None:
    guid = f"{uuid.uuid4()}{HOSTILE}"
    with transaction(engine) as session:
        inbox.accept(
            session,
            source="github",
            event=f"issues{HOSTILE}",
            action=HOSTILE,
            delivery_id=guid,
            payload=json.dumps({"title": HOSTILE}, ensure_ascii=False),
            headers={"X-Custom": HOSTILE},
        )
        session.execute(update(Delivery).values(status="failed", last_error=HOSTILE))
    listing = terminal_cli("deliveries", "list")
    no_raw_control(listing.output)
    assert forged_lines(listing.output) == []
    assert len(listing.output.splitlines()) == 2  # the heading and the one delivery

    shown = terminal_cli("deliveries", "show", guid)
    assert shown.exit_code == 0, shown.output
    no_raw_control(shown.output)
    data = json.loads(shown.output)  # still JSON, with the sender's text intact
    assert data["delivery_id"] == guid and data["last_error"] == HOSTILE
    assert data["headers"]["X-Custom"] == HOSTILE


def test_show_and_history_escape_a_lesson_written_straight_to_sql(
    terminal_cli: Callable[..., Result], engine: Engine
) -> None:
    with transaction(engine) as session:
        bullet = lifecycle.add(session, "Retry the webhook", learned_from="x/y#1", actor="t").bullet
        lifecycle.deprecate(session, bullet.id, actor="t", reason="stale")
        # Before the door cleaned text, or written by hand: the terminal guard still holds.
        session.execute(
            update(Bullet).where(Bullet.id == bullet.id).values(text=f"Retry {HOSTILE}")
        )
    for args in (("show", bullet.id), ("history", bullet.id), ("list", "--status", "all")):
        result = terminal_cli(*args)
        assert result.exit_code == 0, result.output
        no_raw_control(result.output)


def test_an_error_line_escapes_the_argument_it_quotes(
    terminal_cli: Callable[..., Result],
) -> None:
    result = terminal_cli("show", f"pb-1{HOSTILE}")
    assert result.exit_code != 0
    no_raw_control(result.output)
    assert forged_lines(result.output) == []
    assert len(result.output.splitlines()) == 1


def test_a_secret_in_a_hostile_message_is_masked_before_it_is_escaped() -> None:
    secret = "hunter2-s3cret-value"
    with real_log("text", (secret,)) as stream:
        try:
            raise RuntimeError(f"login {secret}{HOSTILE}")
        except RuntimeError:
            logging.getLogger("bot.worker").exception("failed for %s%s", secret, HOSTILE)
    text = stream.getvalue()
    no_raw_control(text)
    assert forged_lines(text) == []
    assert secret not in text and text.count("***") == 2

"""The playbook-bot CLI as a user drives it: output, exit codes and error sentences."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from playbook.db import transaction
from playbook.outcomes import usage
from tests.support import saw


def test_add_prints_the_new_id_and_list_shows_it(cli) -> None:
    result = cli(
        "add",
        "Retry webhooks with an idempotency key",
        "--learned-from",
        "CTMS-4337",
        "--tags",
        "payments,webhooks",
        "--scope",
        "CTMS",
        "--section",
        "error_resolution",
    )
    assert result.exit_code == 0, result.output
    assert result.stdout.strip() == "pb-1"
    listing = cli("list")
    assert "pb-1" in listing.stdout and "Retry webhooks" in listing.stdout
    rows = json.loads(cli("list", "--json").stdout)
    assert rows[0]["id"] == "pb-1"
    assert rows[0]["tags"] == ["payments", "webhooks"]
    assert rows[0]["scope"] == "CTMS"
    assert rows[0]["section"] == "error_resolution"
    assert rows[0]["learned_from"] == "CTMS-4337"


def test_near_duplicate_prints_existing_id_with_a_note(cli) -> None:
    cli("add", "Retry webhooks with an idempotency key", "--learned-from", "CTMS-1")
    result = cli("add", "retry the webhooks with an idempotency key", "--learned-from", "CTMS-2")
    assert result.exit_code == 0
    assert result.stdout.strip() == "pb-1"
    assert "nothing added" in result.stderr and "pb-1" in result.stderr
    assert len(json.loads(cli("list", "--json", "--status", "all").stdout)) == 1


def test_show_has_counters_and_history(cli, engine) -> None:
    cli("add", "Never hold a row lock across an HTTP call", "--learned-from", "CTMS-3")
    saw(engine, "CTMS-9")
    with transaction(engine) as session:
        # A merged PR rated pb-1: a reported outcome may then rate it once too.
        usage.record(session, "cited", ["pb-1"], ticket_key="CTMS-8", pr_key="a/b#1", success=True)
    assert cli("usage", "record", "loaded", "--ids", "pb-1", "--ticket", "CTMS-9").exit_code == 0
    cited = cli(
        "usage",
        "record",
        "cited",
        "--ids",
        "pb-1",
        "--ticket",
        "CTMS-9",
        "--success",
        "--phase",
        "implement",
        "--consumer",
        "claude",
    )
    assert cited.stdout.strip() == "recorded 1 cited event"
    cli("deprecate", "pb-1", "--reason", "superseded by pb-2")
    text = cli("show", "pb-1").stdout
    assert "[deprecated]" in text
    assert "1 loads, 2 cites (2 in successful work, 0 in failed work)" in text
    assert "deprecate" in text and "superseded by pb-2" in text
    data = json.loads(cli("show", "pb-1", "--json").stdout)
    assert (data["loads"], data["cites"], data["cites_success"]) == (1, 2, 2)
    assert data["demoted_reason"] == "superseded by pb-2"
    assert [h["action"] for h in data["history"]] == ["create", "deprecate"]
    assert data["history"][1]["actor"] == "tester"
    assert data["recent_events"][0]["consumer"] == "claude"


def test_status_commands_and_list_filters(cli) -> None:
    cli("add", "Lesson one about retries", "--learned-from", "A-1")
    cli("add", "Lesson two about caching layers", "--learned-from", "A-2", "--status", "proposed")
    cli("add", "Lesson three about database locks", "--learned-from", "A-3", "--scope", "acme/shop")
    assert cli("archive", "pb-1", "--reason", "unused_30d").stdout.strip() == "pb-1 archived"
    assert cli("approve", "pb-2").stdout.strip() == "pb-2 approved"
    assert "already active" in cli("approve", "pb-2").stdout
    ids = lambda *args: [row["id"] for row in json.loads(cli("list", "--json", *args).stdout)]  # noqa: E731
    assert ids() == ["pb-2", "pb-3"]
    assert ids("--status", "archived") == ["pb-1"]
    assert ids("--status", "all", "--scope", "acme/shop") == ["pb-3"]
    assert cli("restore", "pb-1").stdout.strip() == "pb-1 restored"
    assert ids() == ["pb-1", "pb-2", "pb-3"]


def test_edit_history_and_revert(cli) -> None:
    cli("add", "Original wording", "--learned-from", "A-1")
    assert cli("edit", "pb-1", "--text", "Better wording", "--reason", "clarity").exit_code == 0
    history = json.loads(cli("history", "pb-1", "--json").stdout)
    assert [h["action"] for h in history] == ["create", "edit"]
    assert "text: 'Original wording' -> 'Better wording'" in cli("history", "pb-1").stdout
    assert cli("revert", "pb-1", str(history[1]["revision"])).exit_code == 0
    assert json.loads(cli("show", "pb-1", "--json").stdout)["text"] == "Original wording"


def test_list_as_of_shows_the_past(cli) -> None:
    cli("add", "A lesson", "--learned-from", "A-1")
    assert json.loads(cli("list", "--json", "--as-of", "2020-01-01").stdout) == []
    assert [r["id"] for r in json.loads(cli("list", "--json", "--as-of", "2999-01-01").stdout)] == [
        "pb-1"
    ]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("show", "pb-77"), "no bullet with id 'pb-77'"),
        (("deprecate", "pb-77", "--reason", "x"), "no bullet with id 'pb-77'"),
        (("usage", "record", "cited", "--ids", "pb-77", "--ticket", "A-1"), "pb-77"),
        (("usage", "record", "loaded", "--ids", ",", "--ticket", "A-1"), "at least one bullet id"),
        (("usage", "record", "loaded", "--ids", "pb-1", "--ticket", "A-1", "--success"), "cites"),
        (("add", "   ", "--learned-from", "A-1"), "needs some text"),
        (("restore", "pb-1"), "is proposed"),
        (("edit", "pb-1"), "say what to change"),
        (("revert", "pb-1", "999"), "no revision 999"),
        (("list", "--as-of", "last tuesday"), "not a date"),
        (("add", "text without provenance"), "--learned-from"),
    ],
)
def test_user_errors_exit_2_with_one_sentence(cli, args: tuple[str, ...], message: str) -> None:
    cli("add", "A proposed lesson", "--learned-from", "A-1", "--status", "proposed")
    result = cli(*args)
    assert result.exit_code == 2, result.output
    assert message in result.stderr
    assert "Traceback" not in result.output


def run_installed(args: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess:
    """Run the installed console script the way a user would."""
    script = Path(sys.executable).with_name("playbook-bot")
    command = [str(script)] if script.exists() else [sys.executable, "-m", "bot"]
    return subprocess.run(
        [*command, *args], check=False, env=env, cwd=cwd, capture_output=True, text=True, timeout=60
    )


@pytest.mark.slow
def test_first_run_on_a_new_sqlite_file_creates_the_schema(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PLAYBOOK_", "LOG_"))}
    added = run_installed(["add", "First lesson", "--learned-from", "A-1"], env, tmp_path)
    assert added.returncode == 0, added.stderr
    assert added.stdout.strip() == "pb-1"
    assert (tmp_path / "playbook.db").exists()  # the documented default, in the working directory
    listed = run_installed(["list"], env, tmp_path)
    assert "First lesson" in listed.stdout
    assert run_installed(["db", "upgrade"], env, tmp_path).stdout.startswith("schema already at")


def run_here(args: list[str], env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> Result:
    """Run `playbook-bot ARGS` in this process with only ``env`` of the playbook's settings.

    The console script is this same click group (`first run` above runs it as a process), and
    a refusal before any work needs no process of its own: it would only pay the start-up.
    """
    from bot.cli import main

    for name in [n for n in os.environ if n.startswith(("PLAYBOOK_", "LOG_"))]:
        monkeypatch.delenv(name)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return CliRunner().invoke(main, args, catch_exceptions=False)


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("not a url", "is not a database URL"),
        ("sqlite:////nonexistent-dir/sub/playbook.db", "cannot use the database"),
        ("postgresql+psycopg://nobody@127.0.0.1:1/nothing", "cannot use the database"),
        ("mysql+nosuchdriver://x@y/z", "no driver"),
    ],
)
def test_bad_database_url_is_one_sentence_and_exit_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, url: str, message: str
) -> None:
    monkeypatch.chdir(tmp_path)
    result = run_here(["list"], {"PLAYBOOK_DATABASE_URL": url}, monkeypatch)
    assert result.exit_code == 2
    assert message in result.stderr
    assert "PLAYBOOK_DATABASE_URL" in result.stderr
    assert "Traceback" not in result.output
    assert len(result.stderr.strip().splitlines()) == 1


def test_bad_setting_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    env = {"LOG_FORMAT": "xml", "PLAYBOOK_DATABASE_URL": "sqlite:///x.db"}
    result = run_here(["list"], env, monkeypatch)
    assert result.exit_code == 2
    assert "LOG_FORMAT" in result.stderr and "Traceback" not in result.output


@pytest.mark.slow
def test_json_logs_when_asked(tmp_path: Path) -> None:
    env = dict(
        os.environ, LOG_FORMAT="json", LOG_LEVEL="DEBUG", PLAYBOOK_DATABASE_URL="sqlite:///x.db"
    )
    result = run_installed(["list"], env, tmp_path)
    assert result.returncode == 0
    lines = [line for line in result.stderr.splitlines() if line.startswith("{")]
    assert lines, result.stderr
    assert all("level" in json.loads(line) for line in lines)


def bullets(cli) -> list[dict]:
    return json.loads(cli("list", "--status", "all", "--json").stdout)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--learned-from", ""), "error: learned_from: is empty; name the ticket"),
        (("--learned-from", "  "), "error: learned_from: is empty"),
        (("--learned-from", "A-1", "--scope", ""), "error: scope: is empty"),
        (("--learned-from", "A-1", "--section", "s" * 65), "error: section: is 65 characters"),
    ],
)
def test_add_refuses_a_bad_field_naming_it(cli, args: tuple[str, ...], message: str) -> None:
    result = cli("add", "A lesson worth keeping", *args)
    assert result.exit_code == 2
    assert result.stderr.startswith(message) and len(result.stderr.splitlines()) == 1
    assert bullets(cli) == []


def test_a_lesson_over_the_limit_is_refused_until_the_limit_is_raised(cli, monkeypatch) -> None:
    huge = cli("add", "word " * 20_000, "--learned-from", "A-1")  # 100 KB
    assert huge.exit_code == 2
    assert huge.stderr == (
        "error: text: is 99,999 characters long, over the 2,000 allowed "
        "(PLAYBOOK_MAX_LESSON_CHARS); shorten it or split it in two\n"
    )
    assert bullets(cli) == []
    monkeypatch.setenv("PLAYBOOK_MAX_LESSON_CHARS", "3000")
    assert cli("add", "y" * 2_500, "--learned-from", "A-1").stdout.strip() == "pb-1"
    monkeypatch.setenv("PLAYBOOK_MAX_LESSON_CHARS", "0")
    bad_setting = cli("list")
    assert bad_setting.exit_code == 2 and "PLAYBOOK_MAX_LESSON_CHARS" in bad_setting.stderr


def test_edit_refuses_a_bad_field_and_keeps_the_bullet(cli) -> None:
    cli("add", "Keep this wording", "--learned-from", "CTMS-7")
    for args, message in [
        (("--learned-from", ""), "error: learned_from: is empty"),
        (("--scope", ""), "error: scope: is empty"),
        (("--text", "z" * 2_001), "error: text: is 2,001 characters long"),
    ]:
        result = cli("edit", "pb-1", *args)
        assert result.exit_code == 2 and result.stderr.startswith(message), result.output
    [bullet] = bullets(cli)
    assert (bullet["text"], bullet["learned_from"], bullet["scope"]) == (
        "Keep this wording",
        "CTMS-7",
        "global",
    )
    assert [h["action"] for h in json.loads(cli("history", "pb-1", "--json").stdout)] == ["create"]


def test_list_names_its_columns_in_a_header_row(cli) -> None:
    cli("add", "Retry webhooks with an idempotency key", "--learned-from", "CTMS-1")
    lines = cli("list").stdout.splitlines()
    assert lines[0].split() == ["id", "status", "scope", "loads", "cites", "lesson"]
    assert lines[1].split()[:5] == ["pb-1", "active", "global", "0", "0"]
    # The header lines up with the rows: each column starts where its name does.
    assert lines[0].index("status") == lines[1].index("active")
    assert lines[0].index("lesson") == lines[1].index("Retry")
    as_of = cli("list", "--as-of", "2999-01-01").stdout.splitlines()
    assert as_of[0].split() == ["id", "status", "scope", "lesson"]
    # Nothing to list: no header, only the note.
    assert cli("list", "--status", "archived").stdout == ""

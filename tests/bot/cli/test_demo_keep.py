"""`playbook-bot demo --keep PATH`: the demo's playbook kept in a SQLite file for `serve`, never
over a file that is not a previous demo's, and the exact command that serves it."""

from __future__ import annotations

import shlex
import sqlite3
from pathlib import Path

import pytest
from click.testing import Result
from sqlalchemy import text

from playbook import db
from tests.bot.cli.test_cli_errors import error_line
from webhooks.demo import LESSONS
from webhooks.demo_file import is_demo

pytestmark = pytest.mark.slow  # each demo runs the whole loop


def bullets(path: Path) -> list[str]:
    engine = db.make_engine(f"sqlite:///{path}")
    try:
        with engine.connect() as connection:
            return list(
                connection.scalars(text("SELECT text FROM bullets ORDER BY created_at, text"))
            )
    finally:
        engine.dispose()


def served_command(result: Result) -> list[str]:
    """The command the demo printed, as words, checked to be the one line after its intro."""
    lines = result.stdout.splitlines()
    intro = next(n for n, line in enumerate(lines) if line.startswith("See it on the web page"))
    return shlex.split(lines[intro + 1])


def test_the_playbook_is_kept_and_the_command_to_serve_it_printed(cli, tmp_path: Path) -> None:
    result = cli("demo", "--quiet", "--keep", "demo.db")
    assert result.exit_code == 0, result.output
    path = tmp_path / "demo.db"
    assert is_demo(path)
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("demo")) == ["demo.db"]
    kept = bullets(path)
    assert {lesson for lesson, *_ in LESSONS} <= set(kept)
    assert any("outbox" in lesson for lesson in kept)  # the /lesson the demo's Jira comment made
    assert f"Kept the playbook in {path}; a later `demo --keep` on that path replaces it." in (
        result.stdout
    )
    assert served_command(result) == [
        f"PLAYBOOK_DATABASE_URL=sqlite:///{path}",
        "PLAYBOOK_UI_PUBLIC_READ=true",
        "playbook-bot",
        "serve",
    ]
    assert result.stdout.endswith("  then open http://127.0.0.1:8080/ui/\n")


def test_a_path_with_a_space_is_quoted_in_the_command(cli, tmp_path: Path) -> None:
    (tmp_path / "my demos").mkdir()
    result = cli("demo", "--quiet", "--keep", "my demos/one.db")
    assert result.exit_code == 0, result.output
    assert (
        served_command(result)[0] == f"PLAYBOOK_DATABASE_URL=sqlite:///{tmp_path}/my demos/one.db"
    )


def test_a_previous_demo_is_replaced_and_an_empty_file_filled(cli, tmp_path: Path) -> None:
    path = tmp_path / "demo.db"
    path.touch()
    assert cli("demo", "--quiet", "--keep", "demo.db").exit_code == 0
    first = bullets(path)
    engine = db.make_engine(f"sqlite:///{path}")  # someone serves it and adds a lesson
    with engine.begin() as connection:
        connection.execute(text("UPDATE bullets SET text = 'changed since' WHERE id = 'pb-1'"))
    engine.dispose()
    assert cli("demo", "--quiet", "--keep", "demo.db").exit_code == 0
    assert bullets(path) == first  # the rule: a demo's playbook is the demo's to replace


@pytest.mark.parametrize(
    "content",
    [b"my notes\n", b"SQLite format 3\x00" + b"\x00" * 200],
    ids=["a text file", "another SQLite file"],
)
def test_a_file_that_is_not_a_demo_is_refused_untouched(
    cli, tmp_path: Path, content: bytes
) -> None:
    path = tmp_path / "notes.db"
    path.write_bytes(content)
    line = error_line(cli("demo", "--quiet", "--keep", "notes.db"), 2)
    assert line.startswith(
        f"error: invalid value for '--keep': {path} holds something other than a playbook-bot "
        "demo; the demo replaces only its own playbook: choose a new path (see `"
    )
    assert path.read_bytes() == content
    assert [p.name for p in tmp_path.iterdir()] == ["notes.db"]  # nothing built beside it


def test_a_real_playbook_is_refused(cli, tmp_path: Path) -> None:
    engine = db.make_engine(f"sqlite:///{tmp_path / 'playbook.db'}")
    db.ensure_schema(engine)
    engine.dispose()
    assert "holds something other" in error_line(cli("demo", "--keep", "playbook.db"), 2)


def test_a_demo_playbook_a_server_has_open_is_refused(cli, tmp_path: Path) -> None:
    assert cli("demo", "--quiet", "--keep", "demo.db").exit_code == 0
    engine = db.make_engine(f"sqlite:///{tmp_path / 'demo.db'}")  # as `serve` opens it
    try:
        with engine.connect() as connection:
            connection.execute(text("SELECT count(*) FROM bullets"))
            line = error_line(cli("demo", "--quiet", "--keep", "demo.db"), 2)
    finally:
        engine.dispose()
    assert line.startswith(
        f"error: invalid value for '--keep': {tmp_path / 'demo.db'} is open in another process: "
        "stop the server using it first"
    )
    assert cli("demo", "--quiet", "--keep", "demo.db").exit_code == 0  # once it is closed


@pytest.mark.parametrize(
    ("make", "said"),
    [
        (lambda tmp: tmp / "no-such-folder" / "demo.db", "no-such-folder is not a folder"),
        (lambda tmp: tmp, "is a directory"),
        (lambda tmp: tmp / "demo?.db", "cannot be written in a database URL"),
    ],
    ids=["missing folder", "a folder", "a question mark"],
)
def test_a_path_the_demo_cannot_use_is_one_usage_line(cli, tmp_path: Path, make, said) -> None:
    line = error_line(cli("demo", "--keep", str(make(tmp_path))), 2)
    assert said in line, line


def test_a_link_is_refused(cli, tmp_path: Path) -> None:
    assert cli("demo", "--quiet", "--keep", "demo.db").exit_code == 0
    (tmp_path / "link.db").symlink_to(tmp_path / "demo.db")
    assert "is a link" in error_line(cli("demo", "--keep", "link.db"), 2)


def test_the_marker_is_sqlites_application_id(cli, tmp_path: Path) -> None:
    assert cli("demo", "--quiet", "--keep", "demo.db").exit_code == 0
    with sqlite3.connect(tmp_path / "demo.db") as connection:
        [(application_id,)] = connection.execute("PRAGMA application_id").fetchall()
    assert application_id.to_bytes(4, "big") == b"PBdm"

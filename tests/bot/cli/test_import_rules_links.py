"""`import-rules` reads nothing outside the folder it is given: links out, loops, FIFOs."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.support import hang_guard

# Many times what an import of a few small files takes: only a hang (a FIFO's open) fails.
HANG_SECONDS = 60
SECRET = "- The payroll database password is kept in the vault under payroll-admin."
RULES = "# Rules\n\n- Run the unit tests before every push.\n- Format with ruff before a commit.\n"


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A folder beside the checkout holding words that must never become lessons."""
    folder = tmp_path / "elsewhere"
    (folder / "rules").mkdir(parents=True)
    (folder / "secret.md").write_text(f"# Secret\n\n{SECRET}\n")
    (folder / "AGENTS.md").write_text(f"# Secret\n\n{SECRET}\n")
    (folder / "rules" / "payroll.mdc").write_text(f"# Secret\n\n{SECRET}\n")
    return folder


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    folder = tmp_path / "repo"
    folder.mkdir()
    (folder / "AGENTS.md").write_text(RULES)
    return folder


def texts(cli) -> list[str]:
    return [row["text"] for row in json.loads(cli("list", "--json", "--status", "all").stdout)]


def run(cli, *args: str):
    with hang_guard(HANG_SECONDS, f"import-rules {' '.join(args)}"):
        return cli("import-rules", *args)


def test_links_out_of_the_folder_are_named_and_not_read(cli, repo: Path, outside: Path) -> None:
    (repo / "CLAUDE.md").symlink_to(outside / "secret.md")
    (repo / ".windsurfrules").symlink_to("/proc/self/environ")
    (repo / "docs").mkdir()
    (repo / "docs" / "AGENTS.md").symlink_to("../../elsewhere/AGENTS.md")

    result = run(cli, "repo")

    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert "repo/CLAUDE.md: not read, a symbolic link to a file outside repo" in lines
    assert "repo/.windsurfrules: not read, a symbolic link to a file outside repo" in lines
    assert "repo/docs/AGENTS.md: not read, a symbolic link to a file outside repo" in lines
    assert lines[-1] == (
        "added 2 lessons (proposed) from 1 file; skipped 0; 0 near-duplicates; "
        "3 not read (links out of the folder, FIFOs, devices)"
    )
    assert sorted(texts(cli)) == [
        "Format with ruff before a commit.",
        "Run the unit tests before every push.",
    ]
    assert "payroll" not in result.output and "PATH=" not in result.output


def test_folders_linked_out_are_not_searched_and_are_named(cli, repo: Path, outside: Path) -> None:
    (repo / "services").symlink_to(outside, target_is_directory=True)
    (repo / ".cursor").mkdir()
    (repo / ".cursor" / "rules").symlink_to(outside / "rules", target_is_directory=True)

    result = run(cli, "repo", "--json")

    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert sorted(report["not_read"], key=lambda skip: skip["file"]) == [
        {"file": ".cursor/rules", "reason": "a symbolic link to a folder outside repo"},
        {"file": "services", "reason": "a symbolic link to a folder outside repo"},
    ]
    assert [file["name"] for file in report["files"]] == ["repo/AGENTS.md"]
    assert all("payroll" not in text for text in texts(cli))


def test_a_loop_of_links_and_a_link_to_nothing_are_named(cli, repo: Path) -> None:
    (repo / "a").mkdir()
    (repo / "a" / "AGENTS.md").symlink_to("AGENTS.md")  # itself
    (repo / "b").mkdir()
    (repo / "b" / "AGENTS.md").symlink_to("../c/AGENTS.md")
    (repo / "c").mkdir()
    (repo / "c" / "AGENTS.md").symlink_to("../b/AGENTS.md")
    (repo / "CLAUDE.md").symlink_to("gone.md")

    result = run(cli, "repo")

    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert "repo/a/AGENTS.md: not read, a loop of symbolic links" in lines
    assert "repo/b/AGENTS.md: not read, a loop of symbolic links" in lines
    assert "repo/c/AGENTS.md: not read, a loop of symbolic links" in lines
    assert "repo/CLAUDE.md: not read, a symbolic link to nothing" in lines
    assert len(texts(cli)) == 2


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_a_fifo_is_named_and_not_waited_on(cli, repo: Path) -> None:
    os.mkfifo(repo / "CLAUDE.md")
    (repo / "deep").mkdir()
    os.mkfifo(repo / "deep" / "AGENTS.md")

    result = run(cli, "repo")

    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert "repo/CLAUDE.md: not read, not a regular file but a FIFO (named pipe)" in lines
    assert "repo/deep/AGENTS.md: not read, not a regular file but a FIFO (named pipe)" in lines
    assert len(texts(cli)) == 2


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_a_file_named_directly_must_be_a_regular_file_in_its_own_folder(
    cli, tmp_path: Path, outside: Path
) -> None:
    (tmp_path / "named").mkdir()
    (tmp_path / "named" / "AGENTS.md").symlink_to(outside / "secret.md")
    (tmp_path / "fifo").mkdir()
    os.mkfifo(tmp_path / "fifo" / "CLAUDE.md")

    linked = run(cli, "named/AGENTS.md")
    fifo = run(cli, "fifo/CLAUDE.md")

    assert linked.exit_code == 2 and linked.stderr.splitlines() == [
        "error: cannot read named/AGENTS.md: a symbolic link to a file outside its folder"
    ]
    assert fifo.exit_code == 2 and fifo.stderr.splitlines() == [
        "error: cannot read fifo/CLAUDE.md: not a regular file but a FIFO (named pipe)"
    ]
    assert texts(cli) == []


def test_links_inside_the_folder_are_read_once(cli, repo: Path) -> None:
    # CLAUDE.md is often a link to AGENTS.md; a nested one may point back to the root's.
    (repo / "CLAUDE.md").symlink_to("AGENTS.md")
    (repo / "pkg").mkdir()
    (repo / "pkg" / "AGENTS.md").symlink_to("../AGENTS.md")

    result = run(cli, "repo")

    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[-1] == (
        "added 2 lessons (proposed) from 1 file; skipped 0; 0 near-duplicates"
    )

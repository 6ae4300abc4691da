"""`playbook-bot import-rules`: a team's rule files, local or on GitHub, as proposed lessons."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from click.testing import Result

from tests.bot.cli.fake_github import TOKEN, fake_github
from tests.fakes.github import FakeGitHub
from tests.loop_harness import _KEYS, APP_ID, REPO

DATA = Path(__file__).resolve().parents[2] / "data" / "rules"
# 2026-11-02 12:00 UTC: the day each copied rule file was last changed.
CHANGED = datetime(2026, 11, 2, 12, 0, tzinfo=UTC).timestamp()
CLAUDE_MD = """# CLAUDE.md

## Commands

- `make dev` starts the API and the worker with autoreload.
- `make test ARGS=-k name` runs one test by name.

```sh
make dev
```
"""


def error_line(result: Result, exit_code: int) -> str:
    """The one line a failed command wrote on stderr."""
    assert result.exit_code == exit_code, result.output
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: ")
    return lines[0]


def lessons(cli) -> list[dict]:
    return json.loads(cli("list", "--json", "--status", "all").stdout)


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    """A copy of the sample rule files, in the folder the CLI runs in, dated 2026-11-02."""
    root = tmp_path / "repo"
    shutil.copytree(DATA, root)
    for path in root.rglob("*"):
        os.utime(path, (CHANGED, CHANGED))
    return root


def test_a_small_file_prints_each_lesson_each_skip_and_one_summary(cli, tmp_path: Path) -> None:
    path = tmp_path / "CLAUDE.md"
    path.write_text(CLAUDE_MD, encoding="utf-8")
    os.utime(path, (CHANGED, CHANGED))
    result = cli("import-rules", "CLAUDE.md")
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == [
        "CLAUDE.md:5: added pb-1 [commands]: "
        "`make dev` starts the API and the worker with autoreload.",
        "CLAUDE.md:6: added pb-2 [commands]: `make test ARGS=-k name` runs one test by name.",
        "CLAUDE.md:8: skipped, code block: make dev",
        "added 2 lessons (proposed) from 1 file; skipped 1; 0 near-duplicates",
    ]
    assert result.stderr.splitlines() == [
        "proposed lessons wait for a maintainer to approve them on /ui/proposals "
        "(or `playbook-bot approve pb-N`)"
    ]
    [first, _] = lessons(cli)
    assert first["status"] == "proposed"
    assert (first["scope"], first["source"], first["source_url"]) == (
        "global",
        "rules",
        "CLAUDE.md",
    )
    assert first["learned_from"] == "CLAUDE.md@2026-11-02"
    assert first["tags"] == ["commands"]


def test_a_folder_finds_every_known_rule_file(cli, checkout: Path) -> None:
    result = cli("import-rules", "repo")
    assert result.exit_code == 0, result.output
    summary = result.stdout.splitlines()[-1]
    assert summary == "added 33 lessons (proposed) from 6 files; skipped 8; 0 near-duplicates"
    found = {row["learned_from"] for row in lessons(cli)}
    assert found == {
        "AGENTS.md@2026-11-02",
        "CLAUDE.md@2026-11-02",
        ".cursorrules@2026-11-02",
        ".github/copilot-instructions.md@2026-11-02",
        ".cursor/rules/react-components.mdc@2026-11-02",
        "services/billing/AGENTS.md@2026-11-02",
    }
    assert "repo/AGENTS.md:40: skipped, managed block: <!-- playbook-bot:start -->" in (
        result.stdout.splitlines()
    )
    urls = {row["source_url"] for row in lessons(cli)}
    assert "repo/services/billing/AGENTS.md" in urls


def test_a_cursor_rules_folder_and_a_symlinked_claude_md(cli, checkout: Path) -> None:
    result = cli("import-rules", "repo/.cursor/rules", "--dry-run")
    assert result.stdout.splitlines()[-1].startswith("would add 4 lessons (proposed) from 1 file")
    # CLAUDE.md is often a link to AGENTS.md: the file is read once.
    (checkout / "CLAUDE.md").unlink()
    (checkout / "CLAUDE.md").symlink_to("AGENTS.md")
    result = cli("import-rules", "repo/AGENTS.md", "repo/CLAUDE.md", "--dry-run")
    assert result.stdout.splitlines()[-1].startswith("would add 10 lessons (proposed) from 1 file")


def test_a_dry_run_writes_nothing(cli, checkout: Path) -> None:
    result = cli("import-rules", "repo/AGENTS.md", "--dry-run")
    assert result.exit_code == 0, result.output
    assert "repo/AGENTS.md:15: would add [code style]: Format with `ruff format`" in result.stdout
    assert result.stdout.splitlines()[-1] == (
        "would add 10 lessons (proposed) from 1 file; skipped 7; 0 near-duplicates "
        "(dry run: nothing was written)"
    )
    assert lessons(cli) == []


def test_running_it_again_adds_nothing(cli, checkout: Path) -> None:
    assert cli("import-rules", "repo").exit_code == 0
    again = cli("import-rules", "repo")
    assert again.exit_code == 0, again.output
    assert again.stdout.splitlines()[-1] == (
        "added 0 lessons (proposed) from 6 files; skipped 8; 33 near-duplicates"
    )
    assert "repo/CLAUDE.md:7: near-duplicate of pb-11 (100% of words): " in again.stdout
    assert "proposed lessons" not in again.stderr
    assert len(lessons(cli)) == 33


def test_near_duplicates_within_the_import_name_the_first(cli, tmp_path: Path) -> None:
    (tmp_path / "AGENTS.md").write_text("- Never commit secrets to the repository.\n")
    (tmp_path / "CLAUDE.md").write_text("- never commit any secrets to the repository!\n")
    result = cli("import-rules", "AGENTS.md", "CLAUDE.md")
    assert result.stdout.splitlines()[1:] == [
        "CLAUDE.md:1: near-duplicate of AGENTS.md:1 (86% of words): "
        "never commit any secrets to the repository!",
        "added 1 lesson (proposed) from 2 files; skipped 0; 1 near-duplicate",
    ]


def test_status_active_and_scope(cli, checkout: Path) -> None:
    result = cli("import-rules", "repo/.cursorrules", "--status", "active", "--scope", "acme/web")
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[-1] == (
        "added 8 lessons (active) from 1 file; skipped 0; 0 near-duplicates"
    )
    assert result.stderr == ""
    assert {(row["status"], row["scope"]) for row in lessons(cli)} == {("active", "acme/web")}


def test_json_report(cli, checkout: Path) -> None:
    result = cli("import-rules", "repo/CLAUDE.md", "--json", "--dry-run")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert (report["dry_run"], report["scope"], report["status"]) == (True, "global", "proposed")
    assert report["files"] == [
        {
            "name": "repo/CLAUDE.md",
            "kind": "claude",
            "learned_from": "repo/CLAUDE.md@2026-11-02",
            "source_url": "repo/CLAUDE.md",
            "notes": [],
            "paths": None,
        }
    ]
    assert report["added"][0] == {
        "file": "repo/CLAUDE.md",
        "line": 7,
        "id": None,
        "text": "`make dev` starts the API and the worker with autoreload.",
        "tags": ["commands"],
    }
    assert report["skipped"] == [
        {
            "file": "repo/CLAUDE.md",
            "line": 3,
            "reason": "introduction (before the first section)",
            "excerpt": "This file provides guidance to Claude Code (claude.ai/code)…",
        }
    ]
    assert report["near_duplicates"] == []
    assert report["summary"].startswith("would add 6 lessons (proposed) from 1 file")


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (("missing/AGENTS.md",), "error: missing/AGENTS.md does not exist"),
        (
            ("README.md",),
            "error: README.md is not a rule file (AGENTS.md, CLAUDE.md, .cursorrules, "
            ".windsurfrules, .github/copilot-instructions.md, .cursor/rules/*.mdc, "
            ".github/instructions/*.instructions.md, .claude/rules/*.md)",
        ),
        (
            ("empty",),
            "error: empty holds no rule files (AGENTS.md, CLAUDE.md, .cursorrules, "
            ".windsurfrules, .github/copilot-instructions.md, .cursor/rules/*.mdc, "
            ".github/instructions/*.instructions.md, .claude/rules/*.md)",
        ),
        (
            ("repo/AGENTS.md", "--scope", ""),
            "error: --scope is empty",
        ),
        (
            (),
            "error: give rule files or folders, or --repo OWNER/NAME (not both) "
            "(see `main import-rules --help`)",  # `main`: click's name in-process
        ),
        (
            ("repo/AGENTS.md", "--repo", "octo-org/api"),
            "error: give rule files or folders, or --repo OWNER/NAME (not both) "
            "(see `main import-rules --help`)",  # `main`: click's name in-process
        ),
    ],
)
def test_a_bad_path_is_one_line_and_writes_nothing(
    cli, checkout: Path, tmp_path: Path, args: tuple[str, ...], line: str
) -> None:
    (tmp_path / "README.md").write_text("- Not a rule file, whatever it says.\n")
    (tmp_path / "empty").mkdir()
    # A good file first: nothing of it is written either.
    first = ("repo/CLAUDE.md",) if args and not args[0].startswith("repo") else ()
    assert error_line(cli("import-rules", *first, *args), 2) == line
    assert lessons(cli) == []


def test_a_huge_file_is_refused_by_name(cli, tmp_path: Path) -> None:
    (tmp_path / "AGENTS.md").write_bytes(b"- A rule that repeats.\n" * 50_000)
    assert error_line(cli("import-rules", "AGENTS.md"), 2) == (
        "error: AGENTS.md has 1,150,000 bytes, over the 1,000,000 a rule file may have; "
        "import its parts one by one"
    )
    assert lessons(cli) == []


def test_undecodable_bytes_are_read_and_said(cli, tmp_path: Path) -> None:
    (tmp_path / ".windsurfrules").write_bytes(
        b"\xef\xbb\xbfPrefer caf\xe9-free variable names.\r\n"
    )
    result = cli("import-rules", ".windsurfrules")
    assert result.exit_code == 0, result.output
    assert result.stderr.splitlines()[0] == (
        ".windsurfrules: not valid UTF-8 (first at line 1): the bytes that are not were read "
        "as \N{REPLACEMENT CHARACTER}"
    )
    assert lessons(cli)[0]["text"] == "Prefer caf\N{REPLACEMENT CHARACTER}-free variable names."


# --- --repo ----------------------------------------------------------------------------------


@pytest.fixture
def github(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeGitHub]:
    """A fake GitHub with the App installed on REPO and TOKEN as a valid personal token."""
    with fake_github(monkeypatch) as fake:
        yield fake


def seed(fake: FakeGitHub) -> str:
    """The sample rule files on REPO's main branch; the last commit's sha."""
    if not hasattr(fake, "put_file"):
        pytest.skip("the fake GitHub has no contents routes yet (put_file)")
    sha = ""
    for path in sorted(DATA.rglob("*")):
        if path.is_file():
            sha = fake.put_file(REPO, path.relative_to(DATA).as_posix(), path.read_bytes())
    return sha


def test_repo_reads_the_default_branch_with_a_token(cli, github, monkeypatch) -> None:
    sha = seed(github)
    monkeypatch.setenv("GITHUB_TOKEN", TOKEN)
    result = cli("import-rules", "--repo", REPO)
    assert result.exit_code == 0, result.output
    # The root's files and .cursor/rules; nested AGENTS.md files are read from a checkout.
    assert result.stdout.splitlines()[-1] == (
        "added 31 lessons (proposed) from 5 files; skipped 8; 0 near-duplicates"
    )
    assert "AGENTS.md:15: added pb-1 [code style]: Format with `ruff format`" in result.stdout
    rows = lessons(cli)
    assert {row["scope"] for row in rows} == {REPO}
    first = rows[0]
    assert first["learned_from"] == f"{REPO}:AGENTS.md@{sha[:7]}"
    assert first["source_url"] == f"{github.url}/{REPO}/blob/{sha}/AGENTS.md"
    mdc = [row for row in rows if ".mdc" in row["learned_from"]]
    assert mdc[0]["learned_from"] == f"{REPO}:.cursor/rules/react-components.mdc@{sha[:7]}"
    again = cli("import-rules", "--repo", REPO, "--dry-run")
    assert again.stdout.splitlines()[-1] == (
        "would add 0 lessons (proposed) from 5 files; skipped 8; 31 near-duplicates "
        "(dry run: nothing was written)"
    )


def test_repo_through_the_app_installation(cli, github, monkeypatch) -> None:
    seed(github)
    monkeypatch.setenv("GITHUB_APP_ID", str(APP_ID))
    monkeypatch.setenv("GITHUB_APP_PRIVATE_KEY", _KEYS[0])
    result = cli("import-rules", "--repo", REPO, "--scope", "global", "--status", "active")
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[-1].startswith("added 31 lessons (active) from 5 files")
    assert {row["scope"] for row in lessons(cli)} == {"global"}


def test_repo_imports_into_the_scope_its_settings_file_names(cli, github, monkeypatch) -> None:
    seed(github)
    owner = REPO.split("/")[0]
    github.put_file(REPO, ".github/playbook-bot.yml", f"scope: {owner}/shared\n".encode())
    monkeypatch.setenv("GITHUB_TOKEN", TOKEN)
    result = cli("import-rules", "--repo", REPO)
    assert result.exit_code == 0, result.output
    assert {row["scope"] for row in lessons(cli)} == {f"{owner}/shared"}


def test_repo_without_rule_files_or_credentials(cli, github, monkeypatch) -> None:
    assert error_line(cli("import-rules", "--repo", REPO), 2) == (
        "error: --repo reads GitHub: set GITHUB_APP_ID with GITHUB_APP_PRIVATE_KEY (or _FILE), "
        "or GITHUB_TOKEN"
    )
    assert error_line(cli("import-rules", "--repo", "no-slash"), 2) == (
        "error: --repo must look like owner/name, not 'no-slash'"
    )
    monkeypatch.setenv("GITHUB_TOKEN", TOKEN)
    if not hasattr(github, "put_file"):
        pytest.skip("the fake GitHub has no contents routes yet (put_file)")
    assert error_line(cli("import-rules", "--repo", REPO), 2) == (
        f"error: {REPO} has no rule files on main (AGENTS.md, CLAUDE.md, .cursorrules, "
        ".windsurfrules, .github/copilot-instructions.md, .cursor/rules/*.mdc, "
        ".github/instructions/*.instructions.md, .claude/rules/*.md)"
    )
    assert lessons(cli) == []


def test_repo_the_app_cannot_see_is_named(cli, github, monkeypatch) -> None:
    monkeypatch.setenv("GITHUB_APP_ID", str(APP_ID))
    monkeypatch.setenv("GITHUB_APP_PRIVATE_KEY", _KEYS[0])
    assert error_line(cli("import-rules", "--repo", "octo-org/nothing-here"), 1) == (
        "error: GitHub has no repository octo-org/nothing-here that the App can see "
        "(404: Not Found): check --repo, and that the App is installed on it"
    )
    assert lessons(cli) == []

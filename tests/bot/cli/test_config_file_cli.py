"""`playbook-bot config --file PATH --check`: a local settings file checked offline, with the
bot's own messages; `config --schema` prints the shipped JSON Schema.

Offline: the database URL points at a port nothing listens on and no GitHub is configured,
so a command that reached for either would fail.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from bot.cli import main
from playbook.repos.schema import shipped_text
from playbook.repos.settings import FILE_PATH, MAX_FILE_BYTES
from tests.bot.cli.fake_github import GITHUB_SETTINGS, as_app, fake_github
from tests.bot.cli.test_cli_errors import closed_port, error_line
from tests.bot.cli.test_cli_startup import imported_by
from tests.serve_process import console

Run = Callable[..., Result]

GOOD = b"""\
comment: false
max_lessons: 3
min_relevance: 0.05
agents_md:
  enabled: true
"""
BAD = b"""\
comment: yes
colour: blue
max_lessons: 99
agents_md:
  path: README.md
"""
BAD_LINES = [
    f"{FILE_PATH}:1: comment: must be true or false (yes, no, on, off, 1 and 0 are not read as "
    "either)",
    f"{FILE_PATH}:3: max_lessons: must be less than or equal to 20",
    f"{FILE_PATH}:5: agents_md.path: must be 'AGENTS.md', 'CLAUDE.md', "
    "'.github/copilot-instructions.md' or '.cursor/rules/playbook.mdc'",
    f"{FILE_PATH}:2: colour: is not a setting; the settings are enabled, scope, comment, "
    "pr_comment, max_lessons, min_relevance, demote_policy, capture_from_reviews, "
    "holdout_percent, context_budget, ignore_labels, agents_md",
]


def offline_env() -> dict[str, str]:
    """A database nobody answers for (the callers leave GitHub's settings out)."""
    return {"PLAYBOOK_DATABASE_URL": f"postgresql+psycopg://nobody@127.0.0.1:{closed_port()}/x"}


@pytest.fixture
def run(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Run:
    """`playbook-bot ARGS` in-process, offline, in a checkout-like folder."""
    for name, value in offline_env().items():
        monkeypatch.setenv(name, value)
    for name in GITHUB_SETTINGS:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".github").mkdir()

    def invoke(*args: str) -> Result:
        return CliRunner().invoke(
            main, list(args), prog_name="playbook-bot", catch_exceptions=False
        )

    return invoke


def write(content: bytes) -> Path:
    path = Path(FILE_PATH)
    path.write_bytes(content)
    return path


def test_a_good_file_is_one_ok_line(run: Run) -> None:
    write(GOOD)
    result = run("config", "--file", FILE_PATH, "--check")
    assert (result.exit_code, result.stderr) == (0, "")
    assert result.stdout == f"{FILE_PATH}: OK, the bot would apply it\n"


def test_a_bad_file_names_each_problem_with_its_line_and_fails_the_check(run: Run) -> None:
    write(BAD)
    result = run("config", "--file", FILE_PATH, "--check")
    assert error_line(result, 1) == f"error: {FILE_PATH}: 4 problems"
    assert result.stdout.splitlines() == BAD_LINES
    # Without --check it is a report: the same lines, and nothing fails.
    shown = run("config", "--file", FILE_PATH)
    assert (shown.exit_code, shown.stdout) == (0, result.stdout)
    answer = json.loads(run("config", "--file", FILE_PATH, "--json").stdout)
    assert answer["ok"] is False
    assert answer["problems"][0] == {
        "file": FILE_PATH,
        "key": "comment",
        "line": 1,
        "message": BAD_LINES[0].split(": ", 2)[2],
    }


def test_the_messages_are_the_bots_for_the_same_file_on_github(
    run: Run, monkeypatch: pytest.MonkeyPatch
) -> None:
    write(BAD)
    local = run("config", "--file", FILE_PATH).stdout.splitlines()
    with fake_github(monkeypatch, "octo-org/widgets", 31) as github:
        as_app(monkeypatch)
        monkeypatch.setenv("PLAYBOOK_DATABASE_URL", "sqlite:///playbook.db")
        github.put_file("octo-org/widgets", FILE_PATH, BAD)
        remote = run("config", "--repo", "octo-org/widgets").stdout.splitlines()
    assert [f"  {line}" for line in local] == remote[-len(local) :]


def test_a_scope_is_checked_against_the_owner_given_with_repo(run: Run) -> None:
    write(b"scope: octo-org/shared\n")
    alone = run("config", "--file", FILE_PATH, "--check")
    assert alone.exit_code == 0
    assert "--repo OWNER/NAME" in alone.stdout  # the owner was not checked, and it says how
    assert run("config", "--file", FILE_PATH, "--repo", "octo-org/widgets").exit_code == 0
    other = run("config", "--file", FILE_PATH, "--repo", "someone/widgets", "--check")
    assert error_line(other, 1) == f"error: {FILE_PATH}: 1 problem"
    assert other.stdout == (
        f"{FILE_PATH}:1: scope: must start with someone/ (a repository shares lessons only "
        "within its owner)\n"
    )


def test_a_file_over_the_size_the_bot_reads_is_refused_unread(run: Run) -> None:
    write(b"# padding\n" * (MAX_FILE_BYTES // 10 + 1))
    result = run("config", "--file", FILE_PATH, "--check")
    assert error_line(result, 1) == f"error: {FILE_PATH}: 1 problem"
    assert result.stdout == f"{FILE_PATH}: is 65,540 bytes; at most 65,536\n"


def test_a_yaml_mistake_names_its_line(run: Run) -> None:
    write(b"comment: false\nignore_labels: [a, b\n")
    result = run("config", "--file", FILE_PATH, "--check")
    assert result.exit_code == 1
    [line] = result.stdout.splitlines()
    assert line.startswith(f"{FILE_PATH}:3: is not valid YAML (")


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (
            ["--file", "missing.yml"],
            "invalid value for '--file': File 'missing.yml' does not exist",
        ),
        (["--file", ".github"], "invalid value for '--file': File '.github' is a directory"),
        (["--file", FILE_PATH, "--cached"], "--cached reads a repository's stored settings"),
        (["--schema", "--check"], "--schema takes no other option"),
        ([], "give --repo OWNER/NAME, --file PATH or --schema"),
    ],
)
def test_a_wrong_command_is_one_usage_line(run: Run, args: list[str], said: str) -> None:
    write(GOOD)
    line = error_line(run("config", *args), 2)
    assert line.startswith(f"error: {said}"), line
    assert line.endswith("(see `playbook-bot config --help`)")


def test_the_schema_printed_is_the_one_shipped(run: Run) -> None:
    result = run("config", "--schema")
    assert result.exit_code == 0
    assert result.stdout == shipped_text()
    assert json.loads(result.stdout)["$schema"] == "https://json-schema.org/draft/2020-12/schema"


@pytest.mark.slow
def test_the_command_checks_a_file_as_a_process(tmp_path: Path) -> None:
    (tmp_path / "settings.yml").write_bytes(b"holdout_percent: true\n")
    done = subprocess.run(
        [*console(), "config", "--file", "settings.yml", "--check"],
        cwd=tmp_path,
        env={"PATH": "/usr/bin:/bin", **offline_env()},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 1, done.stderr
    assert done.stdout == (
        "settings.yml:1: holdout_percent: must be a whole number written in decimal, such as 5 "
        "(not true, not quoted, not 0x10)\n"
    )
    assert done.stderr == "error: settings.yml: 1 problem\n"


@pytest.mark.slow
def test_checking_a_file_loads_no_client_nor_database_library(tmp_path: Path) -> None:
    (tmp_path / "settings.yml").write_bytes(GOOD)
    loaded = imported_by(
        ["config", "--file", str(tmp_path / "settings.yml"), "--check"],
        tmp_path,
        # Not sqlalchemy: every command parses the database URL with it (its secret is
        # scrubbed from logs); no connection is made, as the offline tests above show.
        ("github", "jira", "requests", "flask", "numpy"),
    )
    assert loaded == []

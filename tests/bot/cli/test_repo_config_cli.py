"""`playbook-bot config --repo`: the settings in force, where each comes from, what is wrong.

The files are read through the real PyGithub client from the fake GitHub's contents API;
--cached, doctor, the deliveries page and the metrics read rows seeded in the database.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from sqlalchemy import Engine

from bot.cli import repo_config
from bot.doctor import run_checks
from playbook.db import transaction
from playbook.models import RepoSettingsRow
from playbook.repos.settings import FILE_PATH
from tests.bot.cli.fake_github import GITHUB_SETTINGS, TOKEN, as_app, fake_github
from tests.bot.cli.test_cli_errors import error_line
from tests.fakes.github import FakeGitHub

REPO = "octo-org/widgets"
ORG_FILE = "octo-org/.github:.github/playbook-bot.yml"
INSTALLATION = 31

ORG = b"""\
scope: octo-org/shared
ignore_labels: [wontfix]
agents_md:
  max_chars: 4000
"""
OWN = b"""\
comment: false
max_lessons: 3
agents_md:
  enabled: true
"""
BAD = b"""\
comment: false
colour: blue
max_lessons: 99
"""


@pytest.fixture
def github(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeGitHub]:
    """A fake GitHub with the App installed and REPO in it; the CLI pointed at it as the App."""
    for name in (
        "PLAYBOOK_LESSONS_PER_TICKET",
        "PLAYBOOK_DEMOTE_POLICY",
        "PLAYBOOK_HOLDOUT_PERCENT",
    ):
        monkeypatch.delenv(name, raising=False)
    with fake_github(monkeypatch, REPO, INSTALLATION) as fake:
        as_app(monkeypatch)
        yield fake


def rows(output: str) -> dict[str, list[str]]:
    """The settings lines of the text output: key -> [value, where it comes from]."""
    found = {}
    for line in output.splitlines()[1:]:
        if not line.startswith("  "):
            break  # the problems, or the error, follow the settings
        key, value, where = line.split(maxsplit=2)
        found[key] = [value, where]
    return found


def _seed(engine: Engine, repo: str, **values: object) -> None:
    with transaction(engine) as session:
        session.add(RepoSettingsRow(repo=repo, **values))


# --- read from GitHub now ----------------------------------------------------------------


def test_a_repository_file_over_its_organisations_shows_each_value_and_its_source(
    cli, github: FakeGitHub
) -> None:
    github.put_file("octo-org/.github", FILE_PATH, ORG)
    github.put_file(REPO, FILE_PATH, OWN)
    result = cli("config", "--repo", REPO)
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0].startswith(f"Settings of {REPO} (read ")
    repository, organisation = f"repository file {FILE_PATH}", f"organisation file {ORG_FILE}"
    assert rows(result.stdout) == {
        "enabled": ["true", "default"],
        "scope": ["octo-org/shared", organisation],
        "comment": ["false", repository],
        "pr_comment": ["true", "default"],
        "max_lessons": ["3", repository],
        # The bot's own defaults: no variable set them, so none is named.
        "min_relevance": ["0.0275", "default"],
        "demote_policy": ["always", "default"],
        "capture_from_reviews": ["heuristic", "default"],
        "holdout_percent": ["0", "default"],
        "context_budget": ["8000", "default"],
        "ignore_labels": ["[wontfix]", organisation],
        "agents_md.enabled": ["true", repository],
        "agents_md.path": ["AGENTS.md", "default"],
        "agents_md.max_chars": ["4000", organisation],
        "agents_md.pause_days": ["30", "default"],
        "agents_md.scoped": ["[]", "default"],
    }
    # Asked of the App's installation on the repository, then both files with its token.
    assert github.calls("GET", f"/repos/{REPO}/installation")
    assert github.calls("GET", f"/repos/{REPO}/contents/{FILE_PATH}")
    assert github.calls("GET", f"/repos/octo-org/.github/contents/{FILE_PATH}")

    answer = json.loads(cli("config", "--repo", REPO, "--json").stdout)
    assert answer["repo"] == REPO and answer["problems"] == [] and answer["error"] is None
    assert answer["read_at"]
    assert answer["settings"]["scope"] == {"value": "octo-org/shared", "source": "organisation"}
    assert answer["settings"]["comment"] == {"value": False, "source": "repository"}
    assert answer["settings"]["ignore_labels"] == {"value": ["wontfix"], "source": "organisation"}
    assert answer["settings"]["max_lessons"] == {"value": 3, "source": "repository"}
    assert answer["settings"]["demote_policy"] == {"value": "always", "source": "default"}
    assert answer["settings"]["agents_md.path"] == {"value": "AGENTS.md", "source": "default"}


def test_without_files_the_scope_is_the_repository_and_the_rest_the_bots_settings(
    cli, github: FakeGitHub, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PLAYBOOK_LESSONS_PER_TICKET", "7")
    # Set to the value it would have anyway: still set, so still named.
    monkeypatch.setenv("PLAYBOOK_DEMOTE_POLICY", "always")
    result = cli("config", "--repo", REPO)
    assert result.exit_code == 0, result.output
    shown = rows(result.stdout)
    assert shown["scope"] == [REPO, "the repository itself"]
    assert shown["max_lessons"] == ["7", "PLAYBOOK_LESSONS_PER_TICKET=7"]
    assert shown["demote_policy"] == ["always", "PLAYBOOK_DEMOTE_POLICY=always"]
    assert shown["context_budget"] == ["8000", "default"]
    assert shown["comment"] == ["true", "default"]
    answer = json.loads(cli("config", "--repo", REPO, "--json").stdout)["settings"]
    assert answer["max_lessons"] == {"value": 7, "source": "installation"}
    assert answer["context_budget"] == {"value": 8000, "source": "default"}


def test_a_bad_file_names_each_problem_with_its_line_and_keeps_the_last_good_settings(
    cli, github: FakeGitHub
) -> None:
    github.put_file("octo-org/.github", FILE_PATH, ORG)
    github.put_file(REPO, FILE_PATH, OWN)
    assert cli("config", "--repo", REPO).exit_code == 0
    github.put_file(REPO, FILE_PATH, BAD)

    result = cli("config", "--repo", REPO)
    assert result.exit_code == 0, result.output  # a bad file breaks nothing: no --check
    lines = result.stdout.splitlines()
    # The last good repository file still applies, over the organisation's.
    assert rows(result.stdout)["max_lessons"] == ["3", f"repository file {FILE_PATH}"]
    assert rows(result.stdout)["comment"] == ["false", f"repository file {FILE_PATH}"]
    problems = lines[lines.index(next(line for line in lines if "problems (" in line)) :]
    assert problems[0] == (
        "2 problems (until fixed, the bot keeps the last good settings of that file, "
        "or the defaults):"
    )
    assert problems[1:] == [
        f"  {FILE_PATH}:3: max_lessons: must be less than or equal to 20",
        f"  {FILE_PATH}:2: colour: is not a setting; the settings are enabled, scope, comment, "
        "pr_comment, max_lessons, min_relevance, demote_policy, capture_from_reviews, "
        "holdout_percent, context_budget, ignore_labels, agents_md",
    ]

    assert result.stderr == ""  # each problem once, in the report, not again as a log line
    checked = cli("config", "--repo", REPO, "--check")
    assert checked.exit_code == 1
    assert checked.stdout == result.stdout  # everything printed first
    assert error_line(checked, 1) == f"error: {REPO}: 2 problems in its settings files"

    answer = json.loads(cli("config", "--repo", REPO, "--json").stdout)
    assert answer["problems"][0] == {
        "file": FILE_PATH,
        "key": "max_lessons",
        "line": 3,
        "message": "must be less than or equal to 20",
    }
    assert answer["settings"]["max_lessons"] == {"value": 3, "source": "repository"}


def test_a_file_github_refuses_is_shown_as_not_read_with_the_last_good_settings(
    cli, github: FakeGitHub
) -> None:
    github.put_file(REPO, FILE_PATH, OWN)
    assert cli("config", "--repo", REPO).exit_code == 0
    github.fail("GET", f"/repos/{REPO}/contents/{FILE_PATH}", 403)
    result = cli("config", "--repo", REPO, "--check")
    assert result.exit_code == 1
    last = result.stdout.splitlines()[-1]
    assert last.startswith("Not read: GitHub refused to show .github/playbook-bot.yml (403")
    assert "grant the App the Contents (read) permission" in last
    assert rows(result.stdout)["comment"] == ["false", f"repository file {FILE_PATH}"]


def test_a_repository_the_app_is_not_installed_on_is_named(cli, github: FakeGitHub) -> None:
    line = error_line(cli("config", "--repo", "octo-org/elsewhere"), 1)
    assert line.startswith("error: GitHub has no repository octo-org/elsewhere that the App")
    assert "check --repo, and that the App is installed on it" in line


def test_a_personal_token_reads_the_files_too(
    cli, github: FakeGitHub, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in GITHUB_SETTINGS[1:4]:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("GITHUB_TOKEN", TOKEN)
    github.put_file(REPO, FILE_PATH, OWN)
    result = cli("config", "--repo", REPO)
    assert result.exit_code == 0, result.output
    assert rows(result.stdout)["comment"] == ["false", f"repository file {FILE_PATH}"]
    assert TOKEN not in result.output


# --- mistakes, no credentials, --cached ----------------------------------------------------


@pytest.mark.parametrize("repo", ["widgets", "octo-org/", "a/b/c", "octo org/widgets", "-x/y"])
def test_a_repo_that_is_not_owner_slash_name_is_refused(cli, repo: str) -> None:
    line = error_line(cli("config", "--repo", repo), 2)
    assert line.startswith("error: --repo must look like OWNER/NAME")


def test_without_credentials_the_settings_to_set_are_named(
    cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in GITHUB_SETTINGS:
        monkeypatch.delenv(name, raising=False)
    line = error_line(cli("config", "--repo", REPO), 2)
    assert "set GITHUB_APP_ID with GITHUB_APP_PRIVATE_KEY (or _FILE), or GITHUB_TOKEN" in line
    assert "--cached" in line


def test_cached_shows_what_was_stored_without_asking_github(
    cli, engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in GITHUB_SETTINGS:
        monkeypatch.delenv(name, raising=False)
    result = cli("config", "--repo", REPO, "--cached")
    assert result.exit_code == 0
    assert result.stdout.startswith(f"{REPO}: no settings stored yet")
    assert (
        json.loads(cli("config", "--repo", REPO, "--cached", "--json").stdout)["settings"] is None
    )

    _seed(
        engine,
        REPO,
        repo_values={"comment": False},
        org_values={"max_lessons": 4},
        problems=[{"file": FILE_PATH, "key": "colour", "line": 2, "message": "is not a setting"}],
        error="GitHub answered 502",
    )
    result = cli("config", "--repo", REPO, "--cached")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0] == f"Settings of {REPO} (never read from GitHub, as stored):"
    assert rows(result.stdout)["max_lessons"] == ["4", f"organisation file {ORG_FILE}"]
    assert f"  {FILE_PATH}:2: colour: is not a setting" in lines
    assert lines[-1] == (
        "Not read: GitHub answered 502 (the settings above are the last good ones, or the defaults)"
    )
    assert cli("config", "--repo", REPO, "--cached", "--check").exit_code == 1


def test_the_share_held_out_is_the_experiments_in_force(
    cli, engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    _seed(engine, REPO, repo_values={"comment": False})
    monkeypatch.setenv("PLAYBOOK_HOLDOUT_PERCENT", "10")
    shown = rows(cli("config", "--repo", REPO, "--cached").stdout)
    assert shown["holdout_percent"] == ["10", "PLAYBOOK_HOLDOUT_PERCENT=10"]
    assert cli("experiment", "start", "--percent", "20").exit_code == 0
    shown = rows(cli("config", "--repo", REPO, "--cached").stdout)
    assert shown["holdout_percent"] == ["20", "the experiment tester started"]
    assert cli("experiment", "stop").exit_code == 0
    shown = rows(cli("config", "--repo", REPO, "--cached").stdout)
    assert shown["holdout_percent"] == [
        "0",
        "the experiment tester stopped (over PLAYBOOK_HOLDOUT_PERCENT=10)",
    ]


def test_text_from_a_file_cannot_drive_the_terminal(cli, engine: Engine) -> None:
    _seed(
        engine,
        REPO,
        problems=[
            {
                "file": FILE_PATH,
                "key": "\x1b[31mred\u202e",
                "line": 1,
                "message": "is not a setting",
            }
        ],
    )
    result = cli("config", "--repo", REPO, "--cached")
    assert "\x1b" not in result.stdout and "\u202e" not in result.stdout
    assert f"{FILE_PATH}:1: \\x1b[31mred\\u202e: is not a setting" in result.stdout


# --- doctor ---------------------------------------------------------------------------------


def test_doctor_warns_of_each_repository_with_a_problem_and_names_the_command(
    cli, engine: Engine
) -> None:
    result = cli("doctor")
    assert "[ok  ] repository settings: no problem in any .github/playbook-bot.yml" in result.output
    _seed(
        engine,
        REPO,
        problems=[
            {"file": FILE_PATH, "key": "colour", "line": 2, "message": "is not a setting"},
            {"file": FILE_PATH, "key": "max_lessons", "line": 3, "message": "must be at most 20"},
        ],
    )
    _seed(engine, "octo-org/gadgets", error="GitHub answered 502")
    _seed(engine, "octo-org/fine", repo_values={"comment": False})
    result = cli("doctor")
    line = next(line for line in result.output.splitlines() if "repository settings" in line)
    assert line == (
        "[WARN] repository settings: 2 repositories use their last good settings (or the "
        "defaults) until fixed: octo-org/gadgets: not read: GitHub answered 502; run "
        "`playbook-bot config --repo octo-org/gadgets`; octo-org/widgets: "
        f"{FILE_PATH}:2: colour: is not a setting (and 1 more); run "
        "`playbook-bot config --repo octo-org/widgets`"
    )
    assert "[FAIL]" not in result.output  # a warning is not a failure


def test_doctor_names_a_few_repositories_and_counts_the_rest(engine: Engine, settings) -> None:
    for number in range(7):
        _seed(engine, f"octo-org/r{number}", error="GitHub answered 502")
    found = [check for check in run_checks(settings) if check.name == "repository settings"]
    assert [check.status for check in found] == ["warn"]
    assert found[0].detail.startswith("7 repositories use their")
    assert found[0].detail.count("run `playbook-bot config --repo") == 5
    assert found[0].detail.endswith("; and 2 more repositories")


def test_the_short_help_is_the_commands_own() -> None:
    assert repo_config.config.get_short_help_str(limit=300).startswith("Show a repository's")


def test_a_repository_can_turn_proposals_from_reviews_off_or_ask_for_the_model(
    cli, github: FakeGitHub
) -> None:
    # YAML reads a bare `off` as false: the file means the setting's value off all the same.
    github.put_file(REPO, FILE_PATH, b"capture_from_reviews: off\n")
    result = cli("config", "--repo", REPO)
    assert result.exit_code == 0, result.output
    assert rows(result.stdout)["capture_from_reviews"] == ["off", f"repository file {FILE_PATH}"]
    answer = json.loads(cli("config", "--repo", REPO, "--json").stdout)
    assert answer["settings"]["capture_from_reviews"] == {"value": "off", "source": "repository"}

    # 'model' is a value a repository may ask for, with or without a model on this server
    # (without one its feedback goes to the heuristic: tests/e2e/test_review_proposals.py).
    github.put_file(REPO, FILE_PATH, b"capture_from_reviews: Model\n")
    checked = cli("config", "--repo", REPO, "--check")
    assert checked.exit_code == 0, checked.output
    shown = cli("config", "--repo", REPO)
    assert rows(shown.stdout)["capture_from_reviews"] == ["model", f"repository file {FILE_PATH}"]
    answer = json.loads(cli("config", "--repo", REPO, "--json").stdout)
    assert answer["settings"]["capture_from_reviews"] == {"value": "model", "source": "repository"}

    github.put_file(REPO, FILE_PATH, b"capture_from_reviews: always\n")
    refused = cli("config", "--repo", REPO, "--check")
    assert refused.exit_code == 1
    assert any(
        line.startswith(f"  {FILE_PATH}:1: capture_from_reviews: ") and "'model'" in line
        for line in refused.stdout.splitlines()
    ), refused.stdout

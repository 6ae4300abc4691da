"""`config --repo` on a file with loose values: each refused with its key and line, none applied."""

from __future__ import annotations

import json

from playbook.repos.settings import FILE_PATH
from tests.bot.cli import test_repo_config_cli as config_cli
from tests.bot.cli.test_repo_config_cli import OWN, REPO, rows
from tests.fakes.github import FakeGitHub

# The same fixture as the config tests: a fake GitHub with the App installed on REPO.
github = config_cli.github

LOOSE = b"""\
holdout_percent: true
max_lessons: '3'
context_budget: 0x10
comment: yes
"""


def test_loose_values_are_problems_and_the_last_good_file_stays(cli, github: FakeGitHub) -> None:
    github.put_file(REPO, FILE_PATH, OWN)
    assert cli("config", "--repo", REPO).exit_code == 0
    github.put_file(REPO, FILE_PATH, LOOSE)

    result = cli("config", "--repo", REPO)
    assert result.exit_code == 0, result.output
    # Not 1% held out, not 3 lessons read from a string: the last good file's values.
    assert rows(result.stdout)["max_lessons"] == ["3", f"repository file {FILE_PATH}"]
    assert rows(result.stdout)["comment"] == ["false", f"repository file {FILE_PATH}"]
    assert rows(result.stdout)["holdout_percent"][1] != f"repository file {FILE_PATH}"
    answer = json.loads(cli("config", "--repo", REPO, "--json").stdout)
    found = {(p["key"], p["line"]): p["message"] for p in answer["problems"]}
    assert set(found) == {
        ("holdout_percent", 1),
        ("max_lessons", 2),
        ("context_budget", 3),
        ("comment", 4),
    }
    assert found[("comment", 4)].startswith("must be true or false")
    assert found[("holdout_percent", 1)].startswith("must be a whole number")
    assert cli("config", "--repo", REPO, "--check").exit_code == 1

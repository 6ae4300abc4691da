"""`playbook-bot agents-md sync|status`: one line per sync with the PR's URL, a dry run that
prints the block and the diff, a pause and its resume, and every error in one line."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta

import pytest
from sqlalchemy import Engine

from playbook import clock
from playbook.db import transaction
from playbook.lessons import lifecycle
from playbook.repos import syncs
from playbook.rules import START
from tests.bot.agents_md_world import enable
from tests.bot.cli.fake_github import GITHUB_SETTINGS
from tests.bot.cli.test_cli_errors import error_line
from tests.fakes.github import FakeGitHub
from tests.loop_harness import _KEYS, APP_ID, INSTALLATION
from tests.payloads import REPO

URL = f"https://github.com/{REPO}/pull/1"


@pytest.fixture
def github(engine: Engine, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeGitHub]:
    """The App installed on REPO, whose settings turn agents_md on; one lesson to sync."""
    fake = FakeGitHub(app_id=APP_ID, public_key=_KEYS[1])
    fake.start()
    fake.add_installation(INSTALLATION)
    fake.add_repo(REPO)
    enable(fake)
    for name in GITHUB_SETTINGS:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("GITHUB_API_URL", fake.url)
    monkeypatch.setenv("GITHUB_APP_ID", str(APP_ID))
    monkeypatch.setenv("GITHUB_APP_PRIVATE_KEY", _KEYS[0])
    monkeypatch.setenv("PLAYBOOK_GITHUB_SECONDS_BETWEEN_REQUESTS", "0")
    monkeypatch.setenv("PLAYBOOK_GITHUB_SECONDS_BETWEEN_WRITES", "0")
    with transaction(engine) as session:
        lifecycle.add(
            session, "Dedupe webhook retries", learned_from="CTMS-1", actor="t", scope=REPO
        )
    yield fake
    fake.stop()


def test_sync_prints_what_it_did_in_one_line_with_the_pr(cli, github) -> None:
    created = cli("agents-md", "sync", "--repo", REPO)
    assert created.exit_code == 0, created.output
    assert created.stdout == (f"{REPO}: opened PR #1 with 1 lesson in AGENTS.md (+1, -0): {URL}\n")
    unchanged = cli("agents-md", "sync", "--repo", REPO)
    assert unchanged.stdout == (
        f"{REPO}: PR #1 already holds the 1 lesson for AGENTS.md; nothing committed: {URL}\n"
    )
    github.put_file(REPO, "AGENTS.md", b"# Team\n")
    updated = cli("agents-md", "sync", "--repo", REPO, "--json")
    report = json.loads(updated.stdout)
    assert (report["action"], report["pull_number"], report["pull_url"]) == ("updated", 1, URL)
    assert report["added"] == [
        {"id": "pb-1", "text": "Dedupe webhook retries", "reason": "new, not used yet"}
    ]
    status = cli("agents-md", "status")
    assert status.stdout.startswith(f"{REPO}  AGENTS.md  {URL}  ")
    assert status.stdout.rstrip().endswith(report["message"])
    (state,) = json.loads(cli("agents-md", "status", "--json").stdout)
    assert (state["repo"], state["pull_number"], state["paused"]) == (REPO, 1, False)


def test_a_dry_run_prints_the_block_and_the_diff_and_writes_nothing(cli, github) -> None:
    result = cli("agents-md", "sync", "--repo", REPO, "--dry-run")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0] == START
    assert "--- /dev/null" in lines and "+++ b/AGENTS.md" in lines
    assert "+- [pb-1] Dedupe webhook retries" in lines
    assert lines[-1] == (
        f"{REPO}: dry run: would open a PR from playbook-bot/agents-md: 1 lesson (+1, -0); "
        "nothing written"
    )
    assert [r for r in github.requests if r.method not in ("GET", "POST")] == []
    assert [r.path for r in github.requests if r.method == "POST"] == [
        f"/app/installations/{INSTALLATION}/access_tokens"
    ]
    assert cli("agents-md", "status").stdout.startswith("no repository has been synced yet")


def test_a_paused_sync_says_until_when_and_resume_lifts_it(cli, github, engine) -> None:
    until = clock.now() + timedelta(days=30)
    with transaction(engine) as session:
        syncs.pause(session, REPO, "AGENTS.md", until, "closed unmerged by @alice")
    paused = cli("agents-md", "sync", "--repo", REPO)
    assert paused.exit_code == 0
    assert paused.stdout == (
        f"{REPO}: sync paused until {until:%Y-%m-%d} (closed unmerged by @alice); "
        f"`playbook-bot agents-md sync --repo {REPO} --resume` syncs now\n"
    )
    assert "paused until" in cli("agents-md", "status").stdout
    resumed = cli("agents-md", "sync", "--repo", REPO, "--resume")
    assert resumed.stdout.startswith(f"{REPO}: opened PR #1")
    assert resumed.stderr == f"{REPO}: pause lifted\n"


def test_errors_are_one_line(cli, github) -> None:
    assert error_line(cli("agents-md", "sync", "--repo", "nope"), 2) == (
        "error: --repo 'nope' is not OWNER/NAME"
    )
    assert error_line(cli("agents-md", "sync", "--repo", "octo/missing"), 1) == (
        "error: GitHub has no repository octo/missing that the App can see (404: Not Found): "
        "check --repo, and that the App is installed on it"
    )
    github.put_file(REPO, "AGENTS.md", f"{START}\n".encode())
    line = error_line(cli("agents-md", "sync", "--repo", REPO), 2)
    assert line.startswith(f"error: {REPO}: AGENTS.md has {START} on line 1 but no ")


def test_without_credentials_the_setting_is_named(cli, github, monkeypatch) -> None:
    monkeypatch.delenv("GITHUB_APP_ID")
    monkeypatch.delenv("GITHUB_APP_PRIVATE_KEY")
    line = error_line(cli("agents-md", "sync", "--repo", REPO), 2)
    assert "GITHUB_TOKEN" in line

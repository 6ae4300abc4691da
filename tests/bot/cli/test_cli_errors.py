"""Every CLI error is one line on stderr naming the fix: exit 2 for a mistake, 1 for a refusal.

GitHub's refusals come from the fake GitHub server through the real PyGithub client; `serve`,
`backfill` and an unexpected error also run as real processes, to see what a shell sees.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import Result
from sqlalchemy import Engine

from playbook import upkeep
from tests.bot.cli.fake_github import TOKEN, as_app, fake_github
from tests.fakes.github import FakeGitHub
from tests.fakes.server import Failure
from tests.loop_harness import APP_ID, INSTALLATION, REPO


def error_line(result: Result, exit_code: int) -> str:
    """The one line a failed command wrote on stderr (checking there is no more than that)."""
    assert result.exit_code == exit_code, result.output
    assert "Traceback" not in result.output
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: ")
    return lines[0]


def closed_port() -> int:
    """A loopback port nothing listens on (connection refused)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def installed(args: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess:
    """Run the console script as a user would."""
    script = Path(sys.executable).with_name("playbook-bot")
    command = [str(script)] if script.exists() else [sys.executable, "-m", "bot"]
    return subprocess.run(
        [*command, *args], env=env, cwd=cwd, capture_output=True, text=True, timeout=60, check=False
    )


def clean_env(database_url: str) -> dict[str, str]:
    """The test process's environment without its playbook or GitHub settings."""
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("PLAYBOOK_", "GITHUB_", "LOG_"))
    }
    return env | {"PLAYBOOK_DATABASE_URL": database_url}


@pytest.fixture
def github(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeGitHub]:
    """A fake GitHub with the App installed on REPO and TOKEN as a valid personal token."""
    with fake_github(monkeypatch) as fake:
        yield fake


# --- GitHub: refused, unknown, unreachable, unusable key ---------------------------------


def test_a_wrong_token_is_refused_by_name_and_never_printed(cli, github, monkeypatch) -> None:
    monkeypatch.setenv("GITHUB_TOKEN", "ghp_notTheRightToken99")
    line = error_line(cli("backfill", "--repo", REPO), 1)
    assert (
        line == "error: GitHub refused the credentials (401: Bad credentials): check GITHUB_TOKEN"
    )
    assert "ghp_" not in line


@pytest.mark.parametrize("args", [("backfill", "--repo", REPO), ("reconcile",)])
def test_an_app_github_does_not_know_is_refused_naming_the_app_settings(
    cli, github, monkeypatch, args: tuple[str, ...]
) -> None:
    as_app(monkeypatch, app_id=APP_ID + 1)  # the JWT's issuer is not the App GitHub knows
    assert error_line(cli(*args), 1) == (
        "error: GitHub refused the credentials (401: Bad credentials): "
        "check GITHUB_APP_ID and GITHUB_APP_PRIVATE_KEY"
    )


def test_an_unknown_repository_names_the_option(cli, github, monkeypatch) -> None:
    as_app(monkeypatch)
    assert error_line(cli("backfill", "--repo", "octo-org/nothing-here"), 1) == (
        "error: GitHub has no repository octo-org/nothing-here that the App can see "
        "(404: Not Found): check --repo, and that the App is installed on it"
    )
    monkeypatch.delenv("GITHUB_APP_ID")
    monkeypatch.setenv("GITHUB_TOKEN", TOKEN)
    # GitHub answers 404 for a repository the token cannot see (the fake lists any name).
    github.failures.append(
        Failure("GET", "/repos/octo-org/nothing-here/pulls", 404, body={"message": "Not Found"})
    )
    line = error_line(cli("backfill", "--repo", "octo-org/nothing-here"), 1)
    assert line == (
        "error: GitHub has no repository octo-org/nothing-here that GITHUB_TOKEN can see "
        "(404: Not Found): check --repo"
    )
    assert TOKEN not in line


@pytest.mark.parametrize("args", [("backfill", "--repo", REPO), ("reconcile",)])
def test_an_unreachable_github_names_the_url_setting(
    cli, github, monkeypatch, args: tuple[str, ...]
) -> None:
    as_app(monkeypatch)
    url = f"http://127.0.0.1:{closed_port()}"
    monkeypatch.setenv("GITHUB_API_URL", url)
    assert error_line(cli(*args), 1) == (
        f"error: cannot reach GitHub at {url} (connection refused): "
        "check GITHUB_API_URL and the network"
    )


@pytest.mark.parametrize("args", [("backfill", "--repo", REPO), ("reconcile",)])
def test_a_private_key_that_is_not_pem_is_a_bad_setting(
    cli, github, monkeypatch, tmp_path: Path, args: tuple[str, ...]
) -> None:
    as_app(monkeypatch, key="MIIEvQIBADANBgkqhkiG9w0BAQEFAASC")  # the body without its PEM lines
    line = error_line(cli(*args), 2)
    assert line.startswith("error: GITHUB_APP_PRIVATE_KEY is not a PEM private key: use the .pem")
    assert "MIIE" not in line
    monkeypatch.delenv("GITHUB_APP_PRIVATE_KEY")
    key_file = tmp_path / "app.pem"
    key_file.write_text("ssh-ed25519 AAAA not an App key\n")
    monkeypatch.setenv("GITHUB_APP_PRIVATE_KEY_FILE", str(key_file))
    assert f"GITHUB_APP_PRIVATE_KEY_FILE {key_file} does not hold a PEM private key" in (
        error_line(cli(*args), 2)
    )
    assert not github.calls(path_prefix="/repos")  # nothing was asked with a broken key


def test_github_failing_or_rate_limited_says_to_wait(cli, github, monkeypatch) -> None:
    as_app(monkeypatch)
    github.fail("GET", "/app/hook/deliveries", 502)
    assert error_line(cli("reconcile"), 1) == (
        "error: GitHub answered 502 (injected failure): try again later, or check GITHUB_API_URL"
    )
    monkeypatch.delenv("GITHUB_APP_ID")
    monkeypatch.setenv("GITHUB_TOKEN", TOKEN)
    limited = {"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": "1900000000"}
    github.fail("GET", f"/repos/{REPO}/pulls", 403, headers=limited)
    assert error_line(cli("backfill", "--repo", REPO), 1) == (
        "error: GitHub's rate limit for GITHUB_TOKEN is used up (403): try again after 17:46 UTC"
    )


def test_redeliveries_github_refuses_are_listed_then_one_error(cli, github, monkeypatch) -> None:
    as_app(monkeypatch)
    github.hook_deliveries.append(
        {
            "id": 1,
            "guid": "6b3c1a0e-0000-4000-8000-000000000001",
            "delivered_at": None,
            "redelivery": False,
            "duration": 0.3,
            "status": "Bad Gateway",
            "status_code": 502,
            "event": "issues",
            "action": "opened",
            "installation_id": INSTALLATION,
            "repository_id": 1,
            "throttled_at": None,
        }
    )
    github.fail("POST", "/app/hook/deliveries/1/attempts", 422)
    result = cli("reconcile")
    assert result.exit_code == 1
    *before, last = result.stderr.splitlines()
    # The log's warning may come first; the listing is what the command prints.
    listed = [line for line in before if line.startswith("  ")]
    refused = 'injected failure: 422 {"message": "injected failure"}'
    assert listed == [f"  6b3c1a0e-0000-4000-8000-000000000001: {refused}"]
    assert last == "error: 1 of the redeliveries failed (above); run reconcile again to retry them"


@pytest.mark.slow
def test_a_github_failure_in_a_real_process(
    engine: Engine, database_url: str, tmp_path: Path
) -> None:
    # The playbook exists already (``engine``), so the process's only line is the error: run
    # alone, it would otherwise first say it created the schema.
    url = f"http://127.0.0.1:{closed_port()}"
    env = clean_env(database_url) | {"GITHUB_TOKEN": TOKEN, "GITHUB_API_URL": url}
    done = installed(["backfill", "--repo", REPO], env, tmp_path)
    assert done.returncode == 1
    assert done.stderr == (
        f"error: cannot reach GitHub at {url} (connection refused): "
        "check GITHUB_API_URL and the network\n"
    )
    assert done.stdout == ""


# --- serve ---------------------------------------------------------------------------------


@pytest.mark.slow
def test_serve_on_a_taken_port_says_so_before_claiming_to_listen(
    database_url: str, tmp_path: Path
) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = installed(["serve", "--port", str(port)], clean_env(database_url), tmp_path)
    assert done.returncode == 1
    assert done.stderr == f"error: port {port} on 127.0.0.1 is in use; pick another with --port\n"


@pytest.mark.parametrize(
    ("host", "message"),
    [
        ("nowhere.invalid", "error: --host 'nowhere.invalid' is neither an address nor a name"),
        ("192.0.2.1", "error: 192.0.2.1 is not an address of this machine; pick another"),
    ],
)
def test_serve_on_a_host_that_is_not_here_names_the_option(cli, host: str, message: str) -> None:
    assert error_line(cli("serve", "--host", host, "--port", str(closed_port())), 2).startswith(
        message
    )


# --- files, ids, spans, usage -------------------------------------------------------------


def test_broken_yaml_names_its_line_and_column(cli, tmp_path: Path) -> None:
    path = tmp_path / "team.yaml"
    path.write_text("- text: Retry webhooks\n  learned_from: A-1\n  tags: [payments, webhooks\n")
    assert error_line(cli("import", str(path)), 2) == (
        f"error: {path}: line 4: not valid YAML at column 1 (did not find expected ',' or ']' "
        "while parsing a flow sequence at line 3, column 9); nothing was imported"
    )


def test_bytes_yaml_cannot_read_are_one_line(cli, tmp_path: Path) -> None:
    path = tmp_path / "team.yaml"
    path.write_bytes(b"\xff\xfe- text\n")  # a UTF-16 mark, then half a character
    line = error_line(cli("import", str(path)), 2)
    assert "line 1: not valid YAML (unacceptable character" in line


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("show", "pb-999"), "error: no bullet with id 'pb-999'; `playbook-bot list --status all`"),
        (("deprecate", "pb-999", "--reason", "x"), "error: no bullet with id 'pb-999'"),
        (("history", "pb-999"), "error: no bullet with id 'pb-999'"),
        (("deliveries", "show", "999"), "error: no delivery '999' in the inbox; `playbook-bot "),
        (("deliveries", "replay", "999"), "`playbook-bot deliveries list` shows them"),
    ],
)
def test_an_unknown_id_is_named_with_how_to_list_ids(
    cli, args: tuple[str, ...], message: str
) -> None:
    assert message in error_line(cli(*args), 2)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("purge", "--older-than", "99999999999d"), "--older-than: '99999999999d' is longer than"),
        (("backfill", "--repo", REPO, "--since", "9" * 5000 + "w"), "--since: '9999"),
        (("reconcile", "--since", "soon"), "--since: 'soon' is not a span such as 90d"),
    ],
)
def test_a_span_too_long_or_not_a_span_is_refused(cli, args: tuple[str, ...], message: str) -> None:
    assert message in error_line(cli(*args), 2)


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (
            ("lsit",),
            "error: no such command 'lsit'. Did you mean 'list'? (see `playbook-bot --help`)",
        ),
        (("--zzz",), "error: no such option '--zzz' (see `playbook-bot --help`)"),
        (("show",), "error: missing argument 'BULLET_ID' (see `playbook-bot show --help`)"),
        (
            ("search", "x", "-k", "0"),
            "error: invalid value for '-k': 0 is not in the range 1<=x<=100 "
            "(see `playbook-bot search --help`)",
        ),
        (
            ("deliveries", "nope"),
            "error: no such command 'nope' (see `playbook-bot deliveries --help`)",
        ),
    ],
)
def test_usage_mistakes_are_one_line_and_exit_2(cli, args: tuple[str, ...], line: str) -> None:
    # click's test runner names the program after the function, `main`.
    assert error_line(cli(*args), 2).replace("`main", "`playbook-bot") == line


def test_the_bare_command_still_prints_its_help(cli) -> None:
    result = cli()
    assert "Commands:" in result.stderr + result.stdout


# --- anything else --------------------------------------------------------------------------


def fail_stats(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make `stats` hit a bug whose message carries the configured token."""

    def broken(session: object, **_: object) -> None:
        raise RuntimeError(f"lost the counters\nwhile calling with {TOKEN}")

    monkeypatch.setattr(upkeep, "stats", broken)
    monkeypatch.setenv("GITHUB_TOKEN", TOKEN)


def test_an_unexpected_error_is_one_scrubbed_line_pointing_at_debug(cli, monkeypatch) -> None:
    fail_stats(monkeypatch)
    assert error_line(cli("stats"), 1) == (
        "error: RuntimeError: lost the counters while calling with *** "
        "(run with --debug for the traceback)"
    )


@pytest.mark.parametrize("how", ["option", "environment"])
def test_debug_prints_the_scrubbed_traceback_first(cli, monkeypatch, how: str) -> None:
    fail_stats(monkeypatch)
    if how == "environment":
        monkeypatch.setenv("PLAYBOOK_DEBUG", "1")
    result = cli("--debug", "stats") if how == "option" else cli("stats")
    assert result.exit_code == 1
    assert result.stderr.startswith("Traceback (most recent call last):")
    assert 'in broken\n    raise RuntimeError(f"lost the counters' in result.stderr
    assert result.stderr.splitlines()[-1] == (
        "error: RuntimeError: lost the counters while calling with ***"
    )
    assert TOKEN not in result.stderr


def test_debug_shows_what_an_explained_error_replaced(cli, github, monkeypatch) -> None:
    monkeypatch.setenv("GITHUB_TOKEN", "ghp_notTheRightToken99")
    result = cli("--debug", "backfill", "--repo", REPO)
    assert result.exit_code == 1
    assert "github.GithubException.BadCredentialsException: 401" in result.stderr
    assert result.stderr.splitlines()[-1].startswith("error: GitHub refused the credentials")


# Runs `playbook-bot stats` in a fresh interpreter with the same bug as fail_stats.
BROKEN_STATS = f"""
import sys
from playbook import upkeep

def broken(session, **_):
    raise RuntimeError("lost the counters while calling with {TOKEN}")

upkeep.stats = broken
from bot.cli import main
main(sys.argv[1:], prog_name="playbook-bot")
"""


@pytest.mark.slow
def test_an_unexpected_error_in_a_real_process(database_url: str, tmp_path: Path) -> None:
    env = clean_env(database_url) | {"GITHUB_TOKEN": TOKEN}
    command = [sys.executable, "-c", BROKEN_STATS]
    run = {"env": env, "cwd": tmp_path, "capture_output": True, "text": True, "timeout": 60}
    done = subprocess.run([*command, "stats"], check=False, **run)  # type: ignore[call-overload]
    assert done.returncode == 1
    assert done.stderr == (
        "error: RuntimeError: lost the counters while calling with *** "
        "(run with --debug for the traceback)\n"
    )
    debug = subprocess.run([*command, "--debug", "stats"], check=False, **run)  # type: ignore[call-overload]
    assert debug.returncode == 1
    assert "Traceback (most recent call last)" in debug.stderr
    assert TOKEN not in debug.stderr

"""The deploy files agree with the code: the Dockerfile, compose.yaml and the App manifest."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml
from sqlalchemy import Engine

ROOT = Path(__file__).resolve().parent.parent

# GitHub sends these to every App; a manifest cannot subscribe to them.
ALWAYS_SENT = {"installation", "installation_repositories"}

# What GitHub requires of an App for each call the bot makes, as the fake GitHub serves them
# (tests/fakes/github.py serves exactly the calls the bot makes), from GitHub's table of
# permissions required for GitHub Apps. None: the App's own JWT, or a personal token (/user).
# Comment calls name both issues and pull_requests: the bot comments on issues and on pull
# requests, and GitHub checks a comment against the permission of what it is on.
PERMISSIONS_BY_CALL: dict[tuple[str, str], dict[str, str] | None] = {
    ("POST", "/app/installations/<int:installation_id>/access_tokens"): None,
    ("GET", "/app/installations"): None,
    ("GET", "/app"): None,
    ("GET", "/repos/<owner>/<name>/installation"): None,
    ("GET", "/app/hook/deliveries"): None,
    ("POST", "/app/hook/deliveries/<int:delivery_id>/attempts"): None,
    ("GET", "/user"): None,
    # The setup page trades the manifest flow's one-time code: the code is the credential.
    ("POST", "/app-manifests/<code>/conversions"): None,
    ("GET", "/repos/<owner>/<name>"): {"metadata": "read"},
    ("GET", "/repos/<owner>/<name>/collaborators/<user>/permission"): {"metadata": "read"},
    ("GET", "/repos/<owner>/<name>/issues/<int:number>"): {"issues": "read"},
    ("GET", "/repos/<owner>/<name>/issues/<int:number>/comments"): {
        "issues": "read",
        "pull_requests": "read",
    },
    ("POST", "/repos/<owner>/<name>/issues/<int:number>/comments"): {
        "issues": "write",
        "pull_requests": "write",
    },
    ("GET", "/repos/<owner>/<name>/issues/comments/<int:comment_id>"): {
        "issues": "read",
        "pull_requests": "read",
    },
    ("PATCH", "/repos/<owner>/<name>/issues/comments/<int:comment_id>"): {
        "issues": "write",
        "pull_requests": "write",
    },
    # 👍/👎 on the bot's lessons comment, read as fit verdicts.
    ("GET", "/repos/<owner>/<name>/issues/comments/<int:comment_id>/reactions"): {
        "issues": "read",
        "pull_requests": "read",
    },
    ("GET", "/repos/<owner>/<name>/pulls"): {"pull_requests": "read"},
    ("GET", "/repos/<owner>/<name>/pulls/<int:number>"): {"pull_requests": "read"},
    ("GET", "/repos/<owner>/<name>/pulls/<int:number>/commits"): {"pull_requests": "read"},
    # A closed PR's review feedback (changes-requested reviews, line comments).
    ("GET", "/repos/<owner>/<name>/pulls/<int:number>/reviews"): {"pull_requests": "read"},
    ("GET", "/repos/<owner>/<name>/pulls/<int:number>/files"): {"pull_requests": "read"},
    ("GET", "/repos/<owner>/<name>/pulls/<int:number>/comments"): {"pull_requests": "read"},
    # The rule-file sync: read the file, commit it on its branch, open or edit its PR.
    ("POST", "/repos/<owner>/<name>/pulls"): {"pull_requests": "write"},
    ("PATCH", "/repos/<owner>/<name>/pulls/<int:number>"): {"pull_requests": "write"},
    ("GET", "/repos/<owner>/<name>/contents/"): {"contents": "read"},
    ("GET", "/repos/<owner>/<name>/contents/<path:path>"): {"contents": "read"},
    ("PUT", "/repos/<owner>/<name>/contents/<path:path>"): {"contents": "write"},
    ("GET", "/repos/<owner>/<name>/branches/<path:branch>"): {"contents": "read"},
    ("GET", "/repos/<owner>/<name>/git/ref/<path:ref>"): {"contents": "read"},
    ("GET", "/repos/<owner>/<name>/git/refs/<path:ref>"): {"contents": "read"},
    ("POST", "/repos/<owner>/<name>/git/refs"): {"contents": "write"},
    ("PATCH", "/repos/<owner>/<name>/git/refs/<path:ref>"): {"contents": "write"},
    ("DELETE", "/repos/<owner>/<name>/git/refs/<path:ref>"): {"contents": "write"},
    ("POST", "/repos/<owner>/<name>/git/blobs"): {"contents": "write"},
    ("GET", "/repos/<owner>/<name>/git/blobs/<sha>"): {"contents": "read"},
    ("GET", "/repos/<owner>/<name>/git/trees/<sha>"): {"contents": "read"},
    ("POST", "/repos/<owner>/<name>/git/trees"): {"contents": "write"},
    ("GET", "/repos/<owner>/<name>/git/commits/<sha>"): {"contents": "read"},
    ("POST", "/repos/<owner>/<name>/git/commits"): {"contents": "write"},
}
LEVELS = {"read": 1, "write": 2}


def _yaml(name: str) -> dict[str, Any]:
    return yaml.safe_load((ROOT / name).read_text(encoding="utf-8"))


def _dockerfile() -> list[tuple[str, str]]:
    """(instruction, arguments) pairs, continuation lines joined and comments dropped."""
    text = (ROOT / "Dockerfile").read_text(encoding="utf-8")
    lines = [line for line in text.splitlines() if not line.lstrip().startswith("#")]
    joined = re.sub(r"\\\n", " ", "\n".join(lines))
    pairs = []
    for line in joined.splitlines():
        if line.strip():
            instruction, _, arguments = line.strip().partition(" ")
            pairs.append((instruction.upper(), arguments.strip()))
    return pairs


def _readme_gunicorn() -> list[str]:
    """The gunicorn command of the docs' production layout."""
    readme = (ROOT / "docs" / "production.md").read_text(encoding="utf-8")
    layout = readme.split("### Production layout", 1)[1]
    line = next(ln for ln in layout.splitlines() if ln.startswith("gunicorn "))
    return shlex.split(line.split("#", 1)[0])


def _healthcheck_code(service: str) -> str:
    """The Python a compose healthcheck runs (`CMD python -c CODE`)."""
    test = _yaml("compose.yaml")["services"][service]["healthcheck"]["test"]
    assert test[:3] == ["CMD", "python", "-c"], test
    return test[3]


def test_image_runs_the_documented_web_command() -> None:
    cmd = [arguments for instruction, arguments in _dockerfile() if instruction == "CMD"]
    assert len(cmd) == 1
    assert json.loads(cmd[0]) == _readme_gunicorn()
    # compose's web service runs the image's command rather than a copy of it.
    assert "command" not in _yaml("compose.yaml")["services"]["web"]


def test_image_is_slim_installs_postgres_and_runs_as_a_user() -> None:
    instructions = _dockerfile()
    args = " ".join(a for i, a in instructions if i == "ARG")
    assert re.search(r"python:3\.(1[1-9])-slim", args), args
    assert any(i == "RUN" and ".[postgres]" in a for i, a in instructions)
    users = [a for i, a in instructions if i == "USER"]
    assert users, "the image must not run as root"
    assert users[-1].split(":")[0] not in {"root", "0"}
    assert ("EXPOSE", "8080") in instructions


def test_compose_runs_migrate_then_web_and_worker_on_its_database() -> None:
    services = _yaml("compose.yaml")["services"]
    assert set(services) >= {"db", "migrate", "web", "worker"}
    db = services["db"]
    assert db["image"].startswith("postgres:16")
    assert db["volumes"]
    assert "pg_isready" in db["healthcheck"]["test"]
    assert services["migrate"]["command"] == ["playbook-bot", "db", "upgrade"]
    assert services["migrate"]["depends_on"]["db"]["condition"] == "service_healthy"
    assert services["worker"]["command"] == ["playbook-bot", "worker"]
    assert "8080:8080" in services["web"]["ports"]
    for name in ("migrate", "web", "worker"):
        service = services[name]
        assert service["env_file"] == ".env"
        url = service["environment"]["PLAYBOOK_DATABASE_URL"]
        assert url.startswith("postgresql+psycopg://") and "@db:5432/" in url, name
    for name in ("web", "worker"):
        condition = services[name]["depends_on"]["migrate"]["condition"]
        assert condition == "service_completed_successfully", name


@pytest.mark.parametrize("command", [["db", "upgrade"], ["worker"]])
def test_compose_commands_exist(command: list[str]) -> None:
    from click.testing import CliRunner

    from bot.cli import main

    result = CliRunner().invoke(main, [*command, "--help"])
    assert result.exit_code == 0, result.output


def test_web_healthcheck_is_liveness_and_answers_without_a_worker(client) -> None:
    url = re.search(r"'(http://[^']+)'", _healthcheck_code("web"))
    assert url is not None
    parts = urlsplit(url.group(1))
    assert parts.port == 8080
    assert client.get(parts.path).status_code == 200
    # Why web does not probe /readyz: with no worker beating, readiness is 503 by design.
    assert client.get("/readyz").status_code == 503


@pytest.mark.slow
def test_worker_healthcheck_follows_this_hosts_worker(
    engine: Engine, database_url: str, tmp_path: Path
) -> None:
    from bot.config import Settings
    from bot.worker import Services, Worker
    from playbook import clock
    from playbook.deliveries import heartbeats

    code = _healthcheck_code("worker")
    env = {**os.environ, "PLAYBOOK_DATABASE_URL": database_url}

    def check() -> int:
        # The working directory keeps a stray .env of the checkout out of the check.
        done = subprocess.run(
            [sys.executable, "-c", code],
            check=False,
            env=env,
            cwd=tmp_path,
            capture_output=True,
            timeout=60,
        )
        # An exception exits with 1 too: an unhealthy answer is silent.
        assert not done.stderr, done.stderr.decode()
        return done.returncode

    assert check() == 1  # no worker at all
    heartbeats.beat(engine, "another-host:1:abcd1234", clock.now())
    assert check() == 1  # a worker, but in another container
    settings = Settings(PLAYBOOK_DATABASE_URL=database_url)
    Worker(Services(engine=engine, settings=settings)).keeper.beat()
    assert check() == 0


def test_manifest_subscribes_to_the_events_the_handlers_register() -> None:
    from bot.handlers import router

    handled = {event for source, event, _ in router._handlers if source == "github"}
    events = _yaml("app.yml")["default_events"]
    assert len(events) == len(set(events))
    assert set(events) == handled - ALWAYS_SENT


def test_manifest_asks_for_exactly_the_permissions_the_calls_need() -> None:
    from tests.fakes.github import FakeGitHub
    from tests.fakes.github_apps import WEB_PAGES

    calls = {
        (method, rule.rule)
        for rule in FakeGitHub().app.url_map.iter_rules()
        # GitHub's web pages of the manifest flow are a browser's, not calls of the bot.
        if rule.endpoint != "static" and not rule.rule.startswith(WEB_PAGES)
        for method in rule.methods or ()
        if method not in {"HEAD", "OPTIONS"}
    }
    unknown = calls - set(PERMISSIONS_BY_CALL)
    assert not unknown, f"add the permission GitHub requires for {sorted(unknown)}"
    needed: dict[str, str] = {"metadata": "read"}  # every App has it
    for call in calls:
        for permission, level in (PERMISSIONS_BY_CALL[call] or {}).items():
            if LEVELS[level] > LEVELS.get(needed.get(permission, ""), 0):
                needed[permission] = level
    assert _yaml("app.yml")["default_permissions"] == needed


def test_manifest_points_at_the_bots_own_routes(app) -> None:
    manifest = _yaml("app.yml")
    assert manifest["public"] is False
    routes = {rule.rule for rule in app.url_map.iter_rules()}
    for url in (manifest["url"], manifest["hook_attributes"]["url"], manifest["redirect_url"]):
        parts = urlsplit(url)
        assert parts.scheme == "https", url
        assert parts.path in routes, url
    assert urlsplit(manifest["hook_attributes"]["url"]).path == "/webhooks/github"


def test_compose_processes_share_the_setup_pages_files() -> None:
    # web writes the App's credentials from the setup page; worker reads them when it starts.
    services = _yaml("compose.yaml")["services"]
    for name in ("web", "worker"):
        directory = services[name]["environment"]["PLAYBOOK_DATA_DIR"]
        mounts = [volume.split(":") for volume in services[name]["volumes"]]
        assert [source for source, target in mounts if target == directory] == ["playbook-data"]
    assert "playbook-data" in _yaml("compose.yaml")["volumes"]
    assert any(
        instruction == "RUN" and "/var/lib/playbook-bot/data" in arguments
        for instruction, arguments in _dockerfile()
    ), "the image makes the directory, so a new volume belongs to its user"

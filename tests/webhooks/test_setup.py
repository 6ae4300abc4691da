"""The first run's setup page: the token gate, the manifest flow through the fake GitHub, Jira."""

from __future__ import annotations

import json
import re
import stat
from collections.abc import Iterator
from html import unescape
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from flask import Flask
from sqlalchemy import Engine

from bot import app_credentials
from bot.config import Settings
from tests.fakes.github import FakeGitHub
from tests.support import JIRA_SECRET
from webhooks import create_app, setup
from webhooks.signatures import sign


@pytest.fixture
def fake() -> Iterator[FakeGitHub]:
    """A fake GitHub serving both the web pages of the manifest flow and the API."""
    server = FakeGitHub()
    server.start()
    yield server
    server.stop()


@pytest.fixture
def first_run(settings: Settings, engine: Engine, fake: FakeGitHub, tmp_path: Path) -> Flask:
    """A server with no GitHub App, its data in tmp_path, GitHub being the fake; token made."""
    configured = settings.model_copy(
        update={
            "data_dir": str(tmp_path),
            "github_webhook_secret": None,
            "github_api_url": fake.url,
            "github_web_host": fake.url,
            "public_url": "https://playbook.example.com",
        }
    )
    app = create_app(configured, engine=engine)
    setup.announce(app)
    return app


def _token(app: Flask) -> str:
    return (Path(app.extensions["playbook"].settings.data_dir) / "setup-token").read_text().strip()


def _entered(app: Flask) -> Any:
    """A client that opened the page with the token (so it holds the setup cookie)."""
    client = app.test_client()
    answer = client.get(f"/setup?token={_token(app)}")
    assert answer.status_code == 303
    assert answer.headers["Location"] == "/setup"
    return client


def _form(page: str) -> tuple[str, dict[str, Any]]:
    """The register form's action and the manifest it posts."""
    action = unescape(re.search(r'<form method="post" action="([^"]+)"', page)[1])
    manifest = json.loads(unescape(re.search(r'name="manifest" value="([^"]*)"', page)[1]))
    return action, manifest


def _registered(app: Flask, fake: FakeGitHub, client: Any) -> tuple[str, str]:
    """Post the page's manifest to the fake GitHub as the browser would; the code and state."""
    action, manifest = _form(client.get("/setup").get_data(as_text=True))
    state = parse_qs(urlsplit(action).query)["state"][0]
    return fake.register(manifest), state


def test_without_the_token_the_page_refuses_with_a_sentence(first_run: Flask) -> None:
    answer = first_run.test_client().get("/setup")
    assert answer.status_code == 403
    assert "one-time token playbook-bot printed" in answer.get_data(as_text=True)


def test_a_wrong_token_is_refused(first_run: Flask) -> None:
    answer = first_run.test_client().get("/setup?token=not-the-token")
    assert answer.status_code == 403
    assert "not the setup token" in answer.get_data(as_text=True)
    assert "playbook_setup" not in answer.headers.get("Set-Cookie", "")


def test_an_app_never_announced_refuses_every_token(settings: Settings, engine: Engine) -> None:
    # Apps made for tests (and not by serve or gunicorn) have no token: nothing opens the page.
    app = create_app(settings, engine=engine)
    assert app.test_client().get("/setup?token=").status_code == 403


def test_the_token_opens_the_page_with_the_manifest_for_the_public_url(
    first_run: Flask, fake: FakeGitHub
) -> None:
    page = _entered(first_run).get("/setup")
    assert page.status_code == 200
    action, manifest = _form(page.get_data(as_text=True))
    assert action.startswith(f"{fake.url}/settings/apps/new?state=")
    assert manifest["hook_attributes"]["url"] == "https://playbook.example.com/webhooks/github"
    assert manifest["redirect_url"] == "https://playbook.example.com/setup/github/callback"
    assert manifest["url"] == "https://playbook.example.com/ui"
    # The events and permissions are app.yml's, the one list of them.
    assert "issues" in manifest["default_events"]
    assert manifest["default_permissions"]["contents"] == "write"
    assert fake.url in page.headers["Content-Security-Policy"]


def test_an_organisation_gets_its_own_registration_page(first_run: Flask, fake: FakeGitHub):
    page = _entered(first_run).get("/setup?org=octo-org&name=Our%20playbook")
    action, manifest = _form(page.get_data(as_text=True))
    assert action.startswith(f"{fake.url}/organizations/octo-org/settings/apps/new?state=")
    assert manifest["name"] == "Our playbook"


@pytest.mark.parametrize(
    ("query", "problem"),
    [
        ("org=-bad-", "organisation"),
        ("name=" + "x" * 40, "App's name"),
        ("public_url=ftp://example.com", "public address"),
    ],
)
def test_bad_choices_are_a_400_naming_the_field(first_run: Flask, query: str, problem: str):
    page = _entered(first_run).get(f"/setup?{query}")
    assert page.status_code == 400
    assert problem in unescape(page.get_data(as_text=True))


def test_the_callback_stores_the_app_0600_and_the_page_goes(
    first_run: Flask, fake: FakeGitHub, tmp_path: Path
) -> None:
    client = _entered(first_run)
    code, state = _registered(first_run, fake, client)
    done = client.get(f"/setup/github/callback?code={code}&state={state}")
    assert done.status_code == 200
    text = done.get_data(as_text=True)
    registered = fake.registered_apps[-1]
    assert f"{registered['html_url']}/installations/new" in text
    assert "Restart playbook-bot" in text
    assert registered["webhook_secret"] not in text
    stored = tmp_path / "github-app.json"
    assert stat.S_IMODE(stored.stat().st_mode) == 0o600
    # A new process (a restart) reads the App from the file.
    fresh = Settings(_env_file=None, PLAYBOOK_DATA_DIR=str(tmp_path))
    assert fresh.github_app_id == registered["id"]
    assert fresh.github_webhook_secret == registered["webhook_secret"]
    assert fresh.github_app_private_key == registered["pem"]
    # The token is spent and the page is gone, for this browser and anyone else.
    assert not (tmp_path / "setup-token").exists()
    assert client.get("/setup").status_code == 404
    assert first_run.test_client().get("/setup").status_code == 404
    assert client.get("/").headers["Location"] == "/ui/"


def test_this_process_verifies_github_deliveries_with_the_new_secret(
    first_run: Flask, fake: FakeGitHub
) -> None:
    client = _entered(first_run)
    code, state = _registered(first_run, fake, client)
    body = json.dumps({"zen": "Keep it logically awesome."}).encode()
    headers = {
        "X-GitHub-Event": "ping",
        "X-GitHub-Delivery": "d-1",
        "Content-Type": "application/json",
    }
    assert client.post("/webhooks/github", data=body, headers=headers).status_code == 503
    client.get(f"/setup/github/callback?code={code}&state={state}")
    secret = fake.registered_apps[-1]["webhook_secret"]
    signed = {**headers, "X-Hub-Signature-256": sign(secret, body)}
    assert client.post("/webhooks/github", data=body, headers=signed).status_code == 200
    wrong = {**headers, "X-Hub-Signature-256": sign("old-secret", body)}
    assert client.post("/webhooks/github", data=body, headers=wrong).status_code == 401


def test_a_state_that_is_not_the_sessions_is_a_400(first_run: Flask, fake: FakeGitHub):
    client = _entered(first_run)
    code, _state = _registered(first_run, fake, client)
    answer = client.get(f"/setup/github/callback?code={code}&state=someone-elses")
    assert answer.status_code == 400
    assert "state" in answer.get_data(as_text=True)
    assert not fake.calls("POST", "/app-manifests/")


def test_the_callback_without_the_setup_cookie_is_refused(first_run: Flask, fake: FakeGitHub):
    code, state = _registered(first_run, fake, _entered(first_run))
    answer = first_run.test_client().get(f"/setup/github/callback?code={code}&state={state}")
    assert answer.status_code == 403
    assert not fake.calls("POST", "/app-manifests/")


def test_a_code_used_twice_is_a_clear_page(first_run: Flask, fake: FakeGitHub, tmp_path: Path):
    client = _entered(first_run)
    code, state = _registered(first_run, fake, client)
    fake.manifest_codes[code]["used"] = True  # traded already, by another tab
    answer = client.get(f"/setup/github/callback?code={code}&state={state}")
    assert answer.status_code == 400
    assert "used already or is more than an hour old" in answer.get_data(as_text=True)
    assert "Back to the setup page" in answer.get_data(as_text=True)
    assert not (tmp_path / "github-app.json").exists()
    assert client.get("/setup").status_code == 200  # register again from the page


def test_an_expired_code_is_a_clear_page(first_run: Flask, fake: FakeGitHub, tmp_path: Path):
    client = _entered(first_run)
    code, state = _registered(first_run, fake, client)
    fake.code_lifetime = 0
    answer = client.get(f"/setup/github/callback?code={code}&state={state}")
    assert answer.status_code == 400
    assert "more than an hour old" in answer.get_data(as_text=True)
    assert not (tmp_path / "github-app.json").exists()


def test_github_down_is_a_502_page_not_a_500(first_run: Flask, fake: FakeGitHub):
    client = _entered(first_run)
    code, state = _registered(first_run, fake, client)
    fake.fail("POST", f"/app-manifests/{code}/conversions", 500)
    answer = client.get(f"/setup/github/callback?code={code}&state={state}")
    assert answer.status_code == 502
    assert "GitHub answered 500" in answer.get_data(as_text=True)


def test_a_malformed_code_is_a_400(first_run: Flask):
    client = _entered(first_run)
    page = client.get("/setup").get_data(as_text=True)
    state = parse_qs(urlsplit(_form(page)[0]).query)["state"][0]
    answer = client.get(f"/setup/github/callback?code=../../x&state={state}")
    assert answer.status_code == 400


def test_root_redirects_to_setup_until_an_app_is_set_up(
    first_run: Flask, settings: Settings, engine: Engine
) -> None:
    assert first_run.test_client().get("/").headers["Location"] == "/setup"
    with_app = create_app(settings.model_copy(update={"github_token": "ghp_x"}), engine=engine)
    assert with_app.test_client().get("/").headers["Location"] == "/ui/"
    assert with_app.test_client().get("/setup").status_code == 404


def test_a_broken_credentials_file_is_a_one_line_settings_error(tmp_path: Path) -> None:
    (tmp_path / "github-app.json").write_text("{not json")
    with pytest.raises(ValueError, match="not a credentials file the setup page wrote"):
        Settings(_env_file=None, PLAYBOOK_DATA_DIR=str(tmp_path))


def test_github_app_id_in_the_environment_wins_over_the_file(
    first_run: Flask, fake: FakeGitHub, tmp_path: Path
) -> None:
    client = _entered(first_run)
    code, state = _registered(first_run, fake, client)
    client.get(f"/setup/github/callback?code={code}&state={state}")
    mine = Settings(_env_file=None, PLAYBOOK_DATA_DIR=str(tmp_path), GITHUB_APP_ID=7)
    assert mine.github_app_id == 7
    assert mine.github_app_private_key is None


def test_the_jira_section_and_its_test_delivery_check(first_run: Flask) -> None:
    client = _entered(first_run)
    page = unescape(client.get("/setup").get_data(as_text=True))
    assert "https://playbook.example.com/webhooks/jira" in page
    assert "jira:issue_created" in page and "comment_created" in page
    assert "JIRA_WEBHOOK_SECRET is set on this server" in page  # the test settings set it
    assert client.get("/setup/jira/last").get_json()["heard"] is False
    body = json.dumps({"webhookEvent": "jira:issue_created", "issue": {"key": "PB-7"}}).encode()
    headers = {"Content-Type": "application/json"}
    bad = {**headers, "X-Hub-Signature": sign("wrong", body)}
    assert client.post("/webhooks/jira", data=body, headers=bad).status_code == 401
    last = client.get("/setup/jira/last").get_json()
    assert last["accepted"] is False
    assert "does not match JIRA_WEBHOOK_SECRET" in last["summary"]
    good = {**headers, "X-Hub-Signature": sign(JIRA_SECRET, body)}
    assert client.post("/webhooks/jira", data=body, headers=good).status_code == 202
    last = client.get("/setup/jira/last").get_json()
    assert last["accepted"] is True
    assert "signature verified" in last["summary"]
    assert "jira:issue_created, PB-7" in last["summary"]
    # Without the setup cookie the check says nothing.
    assert first_run.test_client().get("/setup/jira/last").status_code == 403


def test_without_a_jira_secret_the_page_suggests_one(
    settings: Settings, engine: Engine, tmp_path: Path
) -> None:
    app = create_app(
        settings.model_copy(update={"data_dir": str(tmp_path), "jira_webhook_secret": None}),
        engine=engine,
    )
    setup.announce(app)
    page = unescape(_entered(app).get("/setup").get_data(as_text=True))
    secret = re.search(r'<code id="jira-secret">([0-9a-f]{64})</code>', page)[1]
    again = unescape(_entered(app).get("/setup").get_data(as_text=True))
    assert secret in again  # the same on a reload, so what was pasted stays right
    assert "set <code>JIRA_WEBHOOK_SECRET</code> to it" in page


def test_a_second_app_never_replaces_the_first(first_run: Flask, fake: FakeGitHub, tmp_path: Path):
    first, second = _entered(first_run), _entered(first_run)
    code_1, state_1 = _registered(first_run, fake, first)
    code_2, state_2 = _registered(first_run, fake, second)
    assert second.get(f"/setup/github/callback?code={code_2}&state={state_2}").status_code == 200
    # The other tab's App is registered on GitHub, but the server keeps the one it uses.
    answer = first.get(f"/setup/github/callback?code={code_1}&state={state_1}")
    assert answer.status_code == 404  # the page is gone once an App is set up
    stored = json.loads((tmp_path / "github-app.json").read_text())
    assert stored["app_id"] == fake.registered_apps[1]["id"]
    # Two callbacks racing past the page's check: the file is written once, whole.
    other = app_credentials.AppCredentials(1, "other", "https://x.test", "s", "PRIVATE KEY")
    with pytest.raises(FileExistsError):
        app_credentials.write(tmp_path / "github-app.json", other)
    assert json.loads((tmp_path / "github-app.json").read_text()) == stored
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []


def test_the_setup_address_is_printed_whole_and_the_log_never_holds_the_token(
    settings: Settings, engine: Engine, tmp_path: Path, capsys, caplog
) -> None:
    # As gunicorn's entry point announces it: the log masks credentials, so the address goes to
    # the process's output, where `docker compose logs web` shows it.
    configured = settings.model_copy(
        update={"data_dir": str(tmp_path), "public_url": "https://playbook.example.com"}
    )
    app = create_app(configured, engine=engine)
    with caplog.at_level("WARNING"):
        token = setup.announce(app)
    assert token and token == _token(app)
    printed = capsys.readouterr().err
    assert f"open https://playbook.example.com/setup?token={token} to register one" in printed
    assert token not in caplog.text and "setup-token" in caplog.text

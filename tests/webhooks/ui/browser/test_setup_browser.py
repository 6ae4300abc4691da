"""The first run in chromium: the setup page registers the App through the fake GitHub's pages."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import requests
from sqlalchemy import Engine

from bot.config import Settings
from tests.fakes.github import FakeGitHub
from tests.support import serving
from tests.webhooks.ui.browser.browsing import TOKEN, Site
from webhooks import create_app, setup
from webhooks.signatures import sign

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def _delivery(url: str, secret: str, number: int) -> requests.Response:
    """A signed `installation` delivery, as GitHub sends one when the App is installed."""
    body = json.dumps(
        {"action": "created", "installation": {"id": 77, "account": {"login": "octocat"}}}
    ).encode()
    headers = {
        "Content-Type": "application/json",
        "X-GitHub-Event": "installation",
        "X-GitHub-Delivery": f"setup-{number}",
        "X-Hub-Signature-256": sign(secret, body),
    }
    return requests.post(f"{url}/webhooks/github", data=body, headers=headers, timeout=10)


def test_first_run_registers_the_app_and_accepts_its_deliveries(
    engine: Engine,
    database_url: str,
    tmp_path: Path,
    page_for: Callable[..., Any],
) -> None:
    github = FakeGitHub()
    github.start()
    shots = Path(os.environ.get("PLAYBOOK_SCREENSHOTS") or tmp_path / "screenshots")
    shots.mkdir(parents=True, exist_ok=True)
    data = tmp_path / "data"
    values: dict[str, Any] = {
        "database_url": database_url,
        "api_token": TOKEN,
        "PLAYBOOK_DATA_DIR": str(data),
        "GITHUB_API_URL": github.url,
        # GitHub's web host: the fake renders the "create GitHub App" page, as github.com does.
        "GITHUB_WEB_URL": github.url,
    }
    app = create_app(Settings(_env_file=None, **values), engine=engine)
    token = setup.announce(app)
    assert token
    try:
        with serving(app) as url:
            site = Site(url, engine, app.extensions["playbook"].settings, shots)
            page = page_for(site)
            page.goto(f"{url}/")
            assert page.get_by_text("one-time token").is_visible()  # / -> /setup, refused
            site.shot(page, "setup-0-without-token")
            site.console.clear()  # that 403 was expected; nothing else may fail from here

            page.goto(f"{url}/setup?token={token}")
            page.wait_for_url(f"{url}/setup")  # the token leaves the address bar
            page.get_by_role("heading", name="Register the GitHub App").wait_for()
            assert page.get_by_text(f"{url}/webhooks/jira").is_visible()
            site.shot(page, "setup-1-page")

            page.get_by_role("button", name="Register GitHub App").click()
            page.wait_for_url(re.compile(re.escape(github.url) + r"/settings/apps/new\?state="))
            page.get_by_role("heading", name="Create GitHub App for octocat").wait_for()
            site.shot(page, "setup-2-github-confirms")

            page.get_by_role("button", name="Create GitHub App for octocat").click()
            page.wait_for_url(re.compile(re.escape(url) + r"/setup/github/callback\?code="))
            page.get_by_role("heading", name="GitHub App registered").wait_for()
            registered = github.registered_apps[-1]
            install = page.get_by_role("link", name="Install the App on your repositories")
            assert install.get_attribute("href") == f"{registered['html_url']}/installations/new"
            site.shot(page, "setup-3-registered")
            assert registered["manifest"]["hook_attributes"]["url"] == f"{url}/webhooks/github"

            # This process verifies with the new secret at once.
            assert _delivery(url, registered["webhook_secret"], 1).status_code == 202
            assert _delivery(url, "not-the-secret", 2).status_code == 401
            assert not site.console, site.console
            page.goto(f"{url}/setup")
            assert page.get_by_text("this setup page is gone").is_visible()
            site.shot(page, "setup-4-gone")

        # The restart the page asks for: a new process reads the App from the file.
        restarted = create_app(Settings(_env_file=None, **values), engine=engine)
        assert restarted.extensions["playbook"].settings.github_app_id == registered["id"]
        assert setup.announce(restarted) is None  # no new token: the App is set up
        with serving(restarted) as url:
            assert _delivery(url, registered["webhook_secret"], 3).status_code == 202
            page = page_for(site)
            page.goto(f"{url}/")
            page.wait_for_url(re.compile(re.escape(url) + r"/ui/"))
            site.shot(page, "setup-5-web-page")
    finally:
        github.stop()

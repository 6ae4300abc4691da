"""The deliveries page's panel of repositories whose settings files have problems."""

from __future__ import annotations

import html
import re
from typing import Any

import pytest
from sqlalchemy import Engine

from playbook.db import transaction
from playbook.models import RepoSettingsRow
from playbook.repos.settings import FILE_PATH
from webhooks.ui import deliveries

TOKEN = "ui-maintainer-token"


@pytest.fixture
def page(shared_app: Any) -> Any:
    """A test client logged in with the maintainer token (deliveries are never public), of the
    module's app (its tests only send requests)."""
    client = shared_app(api_token=TOKEN).test_client()
    form = client.get("/ui/login").text
    csrf = re.search(r'name="csrf_token" value="([^"]+)"', form)
    assert csrf
    answer = client.post(
        "/ui/login", data={"token": TOKEN, "name": "carol", "csrf_token": csrf.group(1)}
    )
    assert answer.status_code == 302, answer.text
    return client


def panel(client: Any) -> str | None:
    """The panel's markup on /ui/deliveries, or None when the page has none."""
    answer = client.get("/ui/deliveries")
    assert answer.status_code == 200, answer.text
    found = re.search(r'<section class="card repo-settings".*?</section>', answer.text, re.S)
    return found.group(0) if found else None


def text(markup: str) -> str:
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", markup)).split())


def seed(engine: Engine, repo: str, problems: list[dict[str, Any]], error: str | None) -> None:
    with transaction(engine) as session:
        session.add(RepoSettingsRow(repo=repo, problems=problems, error=error))


def test_no_panel_while_every_settings_file_is_good(page: Any, engine: Engine) -> None:
    with transaction(engine) as session:
        session.add(RepoSettingsRow(repo="octo-org/fine", repo_values={"comment": False}))
    assert panel(page) is None


def test_each_problem_and_the_error_are_shown_with_the_command_to_run(
    page: Any, engine: Engine
) -> None:
    org = "octo-org/.github:.github/playbook-bot.yml"
    seed(
        engine,
        "octo-org/widgets",
        [
            {"file": FILE_PATH, "key": "colour", "line": 2, "message": "is not a setting"},
            {"file": org, "key": "max_lessons", "line": 5, "message": "must be at most 20"},
            {"file": FILE_PATH, "key": None, "line": None, "message": "is not UTF-8 text"},
        ],
        None,
    )
    seed(engine, "octo-org/gadgets", [], "GitHub answered 502")
    said = text(panel(page) or "")
    assert "Repository settings not applied" in said
    assert f"octo-org/widgets {FILE_PATH}:2 colour is not a setting" in said
    assert f"{org}:5 max_lessons must be at most 20" in said
    assert f"{FILE_PATH} is not UTF-8 text" in said
    assert "playbook-bot config --repo octo-org/widgets" in said
    assert "octo-org/gadgets Not read: GitHub answered 502" in said
    assert "playbook-bot config --repo octo-org/gadgets" in said
    # Above the list of deliveries.
    whole = page.get("/ui/deliveries").text
    assert whole.index("repo-settings") < whole.index("No deliveries")


def test_text_from_a_settings_file_is_escaped(page: Any, engine: Engine) -> None:
    seed(
        engine,
        "octo-org/widgets",
        [{"file": FILE_PATH, "key": "<script>alert(1)</script>", "line": 1, "message": "<b>x"}],
        "<img src=x onerror=alert(1)>",
    )
    markup = panel(page) or ""
    assert "<script>" not in markup and "<img" not in markup and "<b>x" not in markup
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in markup
    assert "&lt;img src=x onerror=alert(1)&gt;" in markup


def test_many_problems_and_repositories_are_cut_with_a_count(page: Any, engine: Engine) -> None:
    many = [
        {"file": FILE_PATH, "key": f"k{n}", "line": n + 1, "message": "is not a setting"}
        for n in range(deliveries.SETTINGS_PROBLEMS_SHOWN + 3)
    ]
    for number in range(deliveries.SETTINGS_REPOS_SHOWN + 2):
        seed(engine, f"octo-org/r{number:02d}", many if number == 0 else [], "GitHub answered 502")
    said = text(panel(page) or "")
    assert said.count("playbook-bot config --repo") == deliveries.SETTINGS_REPOS_SHOWN
    assert "and 3 more" in said
    assert "And 2 more repositories" in said

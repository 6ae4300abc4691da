"""Fixtures for the web page tests: Debian's chromium driven by Playwright, and a live app."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine

from bot.config import Settings
from tests.support import serving
from tests.webhooks.ui.browser.browsing import TOKEN, Site, log_in
from webhooks.app import create_app

# Browser downloads are not possible here: Playwright drives the system's chromium.
CANDIDATES = ("chromium", "chromium-browser", "google-chrome")


def _chromium() -> str | None:
    named = os.environ.get("PLAYBOOK_CHROMIUM")
    if named:
        return named
    return next((found for name in CANDIDATES if (found := shutil.which(name))), None)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """One headless chromium per module; skipped without one unless CI demands it.

    Not per session: Playwright's sync API keeps an asyncio loop running in the main thread
    while it is open, and later tests that start their own loop (anyio, MCP) would fail.
    """
    executable = _chromium()
    if executable is None:
        message = "no chromium found: apt-get install -y chromium (or set PLAYBOOK_CHROMIUM)"
        if os.environ.get("PLAYBOOK_REQUIRE_BROWSER"):
            pytest.fail(message)
        pytest.skip(message)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(
            executable_path=executable,
            headless=True,
            # Containers and CI run as root without a user namespace for the sandbox.
            args=["--no-sandbox", "--disable-dev-shm-usage"],
        )
        yield launched
        launched.close()


@pytest.fixture
def serve(engine: Engine, database_url: str, tmp_path: Path) -> Iterator[Callable[..., Site]]:
    """Serve the app with the given settings on a free port; returns the site."""
    shots = Path(os.environ.get("PLAYBOOK_SCREENSHOTS") or tmp_path / "screenshots")
    shots.mkdir(parents=True, exist_ok=True)
    stack: list[Any] = []

    def start(**changes: Any) -> Site:
        values: dict[str, Any] = {"database_url": database_url, "api_token": TOKEN, **changes}
        settings = Settings(_env_file=None, **values)
        context = serving(create_app(settings, engine=engine))
        url = context.__enter__()
        stack.append(context)
        return Site(url, engine, settings, shots)

    yield start
    for context in reversed(stack):
        context.__exit__(None, None, None)


@pytest.fixture
def page_for(browser: Any) -> Iterator[Callable[..., Any]]:
    """A new page (its own cookies) that records console errors and dialogs into the site."""
    contexts: list[Any] = []

    def open_page(site: Site, *, width: int = 1280, height: int = 900) -> Any:
        context = browser.new_context(viewport={"width": width, "height": height})
        contexts.append(context)
        page = context.new_page()
        page.set_default_timeout(15_000)
        page.on("console", lambda message: site.console.append(f"{message.type}: {message.text}"))

        def on_dialog(dialog: Any) -> None:
            site.dialogs.append(dialog.message)
            dialog.dismiss()

        page.on("dialog", on_dialog)
        return page

    yield open_page
    for context in contexts:
        context.close()


@pytest.fixture(scope="module")
def sessions() -> dict[str, list[Any]]:
    """The login cookie of each maintainer name logged in through the form in this module."""
    return {}


@pytest.fixture
def logged_in(sessions: dict[str, list[Any]]) -> Callable[..., None]:
    """Log a page in as ``name`` and open /ui/: through the form the first time in the module,
    then with the cookie that login set (a login is half a second of forms and redirects).

    Every site of the module signs sessions with a key derived from the same token, and a
    cookie of 127.0.0.1 goes to each of its ports. The login form itself is tested with
    ``log_in``.
    """

    def enter(page: Any, site: Site, name: str = "alice") -> None:
        cookies = sessions.get(name)
        if cookies is None:
            log_in(page, site, name)
            sessions[name] = [c for c in page.context.cookies() if c["name"] == "playbook_ui"]
            return
        page.context.add_cookies(cookies)
        page.goto(f"{site.url}/ui/")

    return enter

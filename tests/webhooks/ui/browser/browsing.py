"""What the web page tests share: the served site, its token, and logging in through the form."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy import Engine

from bot.config import Settings

TOKEN = "maintainer-token-for-browser-tests"


@dataclass
class Site:
    """The app served on a local port, with what the page tests need to reach it."""

    url: str
    engine: Engine
    settings: Settings
    shots: Path
    console: list[str] = field(default_factory=list)
    dialogs: list[str] = field(default_factory=list)

    def shot(self, page: Any, name: str) -> None:
        """Save a full-page screenshot (the README shows two of them)."""
        page.screenshot(path=str(self.shots / f"{name}.png"), full_page=True)


def log_in(page: Any, site: Site, name: str = "alice") -> None:
    """Log in through the form, as a maintainer would."""
    page.goto(f"{site.url}/ui/login")
    page.locator("input[type=password]").fill(TOKEN)
    page.get_by_label(re.compile("^Your name")).fill(name)
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url(re.compile(r"/ui/(\?.*)?$"))

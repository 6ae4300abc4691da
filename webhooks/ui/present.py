"""How /ui pages show values: times, percentages, and links to tickets and pull requests."""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any
from urllib.parse import quote, urlsplit

from flask import Flask

from bot.config import Settings
from playbook import clock
from playbook.lessons import secrets

# owner/repo#12, as the bot writes GitHub tickets and pull requests.
_GITHUB_KEY = re.compile(r"([A-Za-z0-9][A-Za-z0-9-]{0,38})/([A-Za-z0-9._-]{1,100})#([0-9]{1,9})")
_JIRA_KEY = re.compile(r"[A-Za-z][A-Za-z0-9_]{0,49}-[0-9]{1,12}")


def when(value: datetime | str | None) -> str:
    """A time (or ISO 8601 text, as JSON-ready reports carry) in UTC, to the minute; a dash
    for none."""
    if value is None:
        return "—"
    moment = clock.parse_time(value) if isinstance(value, str) else clock.to_utc(value)
    return f"{moment:%Y-%m-%d %H:%M} UTC"


def ago(value: datetime | None) -> str:
    """How long ago, in the largest unit that fits ("3 days ago")."""
    if value is None:
        return "never"
    seconds = max((clock.now() - clock.to_utc(value)).total_seconds(), 0)
    for unit, size in (("day", 86_400), ("hour", 3_600), ("minute", 60)):
        if seconds >= size:
            count = int(seconds // size)
            return f"{count} {unit}{'s' if count != 1 else ''} ago"
    return "just now"


def percent(value: float | None) -> str:
    """0.4567 as "46%"; a dash when there is nothing to divide."""
    return "—" if value is None else f"{value * 100:.0f}%"


def points(value: float | None) -> str:
    """A difference of two rates as signed percentage points: "+8", "-2", "0"; a dash for none."""
    if value is None:
        return "—"
    rounded = round(value * 100)
    return f"{rounded:+d}" if rounded else "0"


def short(text: str | None, chars: int = 140) -> str:
    """The start of a text on one line, cut at a word."""
    flat = " ".join((text or "").split())
    if len(flat) <= chars:
        return flat
    return flat[:chars].rsplit(" ", 1)[0] + "…"


def visible(text: str | None) -> str:
    """Text without direction overrides or invisible characters (`characters.visible`), and
    without credentials (`secrets.masked`: dropping invisible characters rejoins a split one).

    Stored lesson text is visible already; shown so again for rows and revisions written
    before that rule. Templates also put lesson text in a ``dir="auto"`` element or
    ``<bdi>``, so a Hebrew or Arabic lesson reads in its direction and leaves the page's alone.
    """
    return secrets.masked(text)


def shown(value: Any) -> str:
    """A revision's old or new value: lists joined, ISO times as times, nothing as a dash."""
    if value is None or value in ("", []):
        return "—"
    if isinstance(value, list):
        return ", ".join(str(item) for item in value)
    if isinstance(value, str) and len(value) >= 19 and value[4] == "-" and value[10] == "T":
        try:
            return when(datetime.fromisoformat(value))
        except ValueError:
            return value
    return str(value)


def web_url(value: str | None) -> str | None:
    """An http(s) URL as it is, or None: a javascript: or data: URL never becomes a link."""
    if not value or len(value) > 2_048:
        return None
    try:
        parts = urlsplit(value)
    except ValueError:
        return None
    return value if parts.scheme in ("http", "https") and parts.netloc else None


class Links:
    """Where a ticket key or pull request key opens: Jira's browse page or GitHub's."""

    def __init__(self, settings: Settings) -> None:
        self.github = settings.github_web_url.rstrip("/")
        self.jira = (settings.jira_url or "").rstrip("/") or None

    def ticket(self, key: str | None) -> str | None:
        """The page of a Jira issue or GitHub issue (GitHub forwards a PR's number to it)."""
        if not key:
            return None
        found = _GITHUB_KEY.fullmatch(key)
        if found:
            owner, repo, number = found.groups()
            return f"{self.github}/{quote(owner)}/{quote(repo)}/issues/{number}"
        if self.jira and _JIRA_KEY.fullmatch(key):
            return f"{self.jira}/browse/{quote(key.upper())}"
        return None

    def pull(self, key: str | None) -> str | None:
        """The page of a pull request ``owner/repo#12``."""
        found = _GITHUB_KEY.fullmatch(key or "")
        if not found:
            return None
        owner, repo, number = found.groups()
        return f"{self.github}/{quote(owner)}/{quote(repo)}/pull/{number}"


def install(app: Flask, settings: Settings) -> None:
    """Make the filters and the link maker available to every template."""
    links = Links(settings)
    filters: dict[str, Any] = {
        "when": when,
        "ago": ago,
        "percent": percent,
        "points": points,
        "short": short,
        "shown": shown,
        "visible": visible,
        "web_url": web_url,
        "ticket_url": links.ticket,
        "pull_url": links.pull,
    }
    app.jinja_env.filters.update(filters)

"""The GitHub App manifest the setup page posts: app.yml with this server's addresses filled in."""

from __future__ import annotations

import json
import re
from functools import cache
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

MANIFEST = Path(__file__).with_name("app.yml")
# GitHub logins and organisation names: letters, digits and single hyphens, 39 at most.
_ORG = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9]|-(?=[A-Za-z0-9])){0,38}")
# GitHub caps an App's name at 34 characters; it turns it into the App's slug.
_APP_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9 ._-]{0,33}")
CALLBACK_PATH = "/setup/github/callback"


@cache
def _template() -> dict[str, Any]:
    import yaml  # only the setup page needs it

    return yaml.safe_load(MANIFEST.read_text(encoding="utf-8"))


def org_problem(org: str) -> str | None:
    """Why ``org`` is not an organisation's name GitHub could have, or None."""
    if _ORG.fullmatch(org):
        return None
    return "an organisation's name is letters, digits and single hyphens, up to 39 characters"


def name_problem(name: str) -> str | None:
    """Why ``name`` cannot be the App's name, or None."""
    if _APP_NAME.fullmatch(name):
        return None
    return "an App's name is up to 34 letters, digits, spaces and . _ - (starting with one)"


def manifest(public_url: str, name: str) -> dict[str, Any]:
    """app.yml for the server at ``public_url`` (no trailing /), registered as ``name``."""
    built = json.loads(json.dumps(_template()))  # a deep copy of plain JSON values
    built["name"] = name
    built["url"] = f"{public_url}/ui"
    built["hook_attributes"] = {**built["hook_attributes"], "url": f"{public_url}/webhooks/github"}
    built["redirect_url"] = f"{public_url}{CALLBACK_PATH}"
    return built


def default_name() -> str:
    """The App's name in app.yml."""
    return str(_template()["name"])


def registration_url(github_web_url: str, state: str, org: str | None) -> str:
    """Where the manifest is posted: the personal account's new-App page, or an organisation's."""
    owner = f"/organizations/{quote(org, safe='')}" if org else ""
    return f"{github_web_url}{owner}/settings/apps/new?{urlencode({'state': state})}"

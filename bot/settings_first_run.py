"""The settings of the first run: where the bot is reached, where it keeps files, GitHub's host.

Settings (bot/config.py) inherits them; they also read the App credentials the setup page
stored, so a registered App works without copying its secrets into the environment.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from pydantic import Field, field_validator, model_validator
from pydantic_settings import BaseSettings

from bot import app_credentials

MAX_URL_CHARS = 500


def web_address(value: str | None, example: str) -> str | None:
    """``value`` as a site's base address (http(s), a host, no query), without a trailing /."""
    if value is None or not value.strip():
        return None
    value = value.strip()
    if len(value) > MAX_URL_CHARS:
        raise ValueError(f"is longer than {MAX_URL_CHARS} characters")
    try:
        parts = urlsplit(value)
        parts.port  # noqa: B018 - raises ValueError for a port that is not a number
    except ValueError:
        raise ValueError(f"must be an http:// or https:// address such as {example}") from None
    if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
        raise ValueError(f"must be an http:// or https:// address such as {example}")
    if parts.query or parts.fragment or parts.username or parts.password:
        raise ValueError(f"must be a plain address, no query, fragment or login, e.g. {example}")
    return value.rstrip("/")


class FirstRunSettings(BaseSettings):
    """Where the bot is reached and keeps its files, and which GitHub it registers with."""

    data_dir: str = Field(
        ".",
        min_length=1,
        validation_alias="PLAYBOOK_DATA_DIR",
        description="Directory of the files the bot writes itself: the GitHub App credentials "
        "the setup page stores (github-app.json, 0600) and its one-time setup token.",
    )
    public_url: str | None = Field(
        None,
        validation_alias="PLAYBOOK_PUBLIC_URL",
        description="The address GitHub and Jira reach this server at (https://playbook."
        "example.com); the setup page builds the webhook URLs from it.",
    )
    github_web_host: str | None = Field(
        None,
        validation_alias="GITHUB_WEB_URL",
        description="GitHub's web address where Apps are registered: unset, github.com, or the "
        "GitHub Enterprise Server host of GITHUB_API_URL (https://HOST/api/v3 -> https://HOST).",
    )

    @field_validator("public_url")
    @classmethod
    def _public_url(cls, value: str | None) -> str | None:
        return web_address(value, "https://playbook.example.com")

    @field_validator("github_web_host")
    @classmethod
    def _github_web_host(cls, value: str | None) -> str | None:
        return web_address(value, "https://github.example.com")

    @property
    def github_web_url(self) -> str:
        """Where people open GitHub pages: GITHUB_WEB_URL, github.com, or the Enterprise host."""
        if self.github_web_host:
            return self.github_web_host
        api = str(getattr(self, "github_api_url", "https://api.github.com")).rstrip("/")
        if api == "https://api.github.com":
            return "https://github.com"
        # GitHub Enterprise Server serves its API under /api/v3 on the web host.
        return api.removesuffix("/api/v3")

    @property
    def credentials_file(self) -> Path:
        """Where the setup page stores the App's credentials."""
        return app_credentials.path_in(self.data_dir)

    @model_validator(mode="after")
    def _app_from_the_setup_page(self) -> Any:
        # GITHUB_APP_ID in the environment means the App is configured there: the file is not
        # read. Without it, the App the setup page registered is used whole, its webhook secret
        # included (GitHub signs that App's deliveries with it, whatever the environment says).
        if getattr(self, "github_app_id", None) is not None:
            return self
        stored = app_credentials.read(self.credentials_file)
        if stored is not None:
            self.github_app_id = stored.app_id
            self.github_app_private_key = stored.pem
            self.github_app_private_key_file = None
            self.github_webhook_secret = stored.webhook_secret
        return self

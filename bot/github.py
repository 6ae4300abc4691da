"""GitHub clients: a GitHub App (one client per installation) or a personal token."""

from __future__ import annotations

import threading
from pathlib import Path

from github import Auth, Github, GithubIntegration

from bot.config import Settings


class NotConfigured(Exception):
    """The setting that would enable a side effect is missing; the message names it."""


class GitHubClients:
    """Hands out PyGithub clients; App installation tokens are reused until they expire.

    PyGithub's AppInstallationAuth fetches an installation token on first use and
    refreshes it shortly before its hour is up, so keeping one client per installation
    is what makes tokens reused instead of minted for every delivery.
    """

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._lock = threading.Lock()
        self._clients: dict[int | None, Github] = {}
        self._integration: GithubIntegration | None = None
        self._logins: dict[bool, str] = {}

    @property
    def configured(self) -> bool:
        """Whether any GitHub credentials are set."""
        return self.missing() is None

    def missing(self) -> str | None:
        """The settings to set for GitHub calls to work, or None when they are set."""
        settings = self.settings
        if settings.github_token:
            return None
        if settings.github_app_id and (
            settings.github_app_private_key or settings.github_app_private_key_file
        ):
            return None
        return "GITHUB_APP_ID with GITHUB_APP_PRIVATE_KEY (or _FILE), or GITHUB_TOKEN"

    def _private_key(self) -> str:
        settings = self.settings
        if settings.github_app_private_key:
            # Secrets stores often flatten newlines; PEM needs them back.
            return settings.github_app_private_key.replace("\\n", "\n")
        path = Path(settings.github_app_private_key_file or "")
        try:
            return path.read_text()
        except OSError as error:
            raise NotConfigured(
                f"GITHUB_APP_PRIVATE_KEY_FILE {path} cannot be read ({error.strerror})"
            ) from None

    def _client_options(self) -> dict[str, object]:
        settings = self.settings
        return {
            "timeout": int(settings.http_timeout_seconds),
            # The worker retries with backoff; PyGithub's own retries would hold the thread.
            "retry": None,
            "seconds_between_requests": settings.github_seconds_between_requests or None,
            "seconds_between_writes": settings.github_seconds_between_writes or None,
            # Lazy objects make no request until a value is needed: get_repo(...).get_issue(n)
            # then costs one call (the comment), not three.
            "lazy": True,
        }

    def integration(self) -> GithubIntegration:
        """The App itself (for /app endpoints such as hook deliveries)."""
        if not (self.settings.github_app_id and self.missing() is None):
            raise NotConfigured("GITHUB_APP_ID and GITHUB_APP_PRIVATE_KEY are not set")
        with self._lock:
            if self._integration is None:
                auth = Auth.AppAuth(self.settings.github_app_id, self._private_key())
                self._integration = GithubIntegration(
                    auth=auth,
                    base_url=self.settings.github_api_url,
                    **self._client_options(),
                )
            return self._integration

    def missing_for(self, installation_id: int | None) -> str | None:
        """Why no client can act for ``installation_id`` (naming the setting), or None."""
        missing = self.missing()
        if missing is not None:
            return f"GitHub is not configured: set {missing}"
        if installation_id is None and not self.settings.github_token:
            return "this delivery has no installation id and GITHUB_TOKEN is not set"
        return None

    def for_installation(self, installation_id: int | None) -> Github:
        """The client acting as the App's installation, or as the personal token owner."""
        missing = self.missing_for(installation_id)
        if missing is not None:
            raise NotConfigured(missing)
        settings = self.settings
        use_app = bool(settings.github_app_id) and installation_id is not None
        key = installation_id if use_app else None
        with self._lock:
            client = self._clients.get(key)
        if client is not None:
            return client
        if use_app:
            assert installation_id is not None
            client = self.integration().get_github_for_installation(installation_id)
        else:
            client = Github(
                auth=Auth.Token(settings.github_token or ""),
                base_url=settings.github_api_url,
                **self._client_options(),
            )
        with self._lock:
            return self._clients.setdefault(key, client)

    def bot_login(self, installation_id: int | None) -> str:
        """The login the bot's comments carry: ``<app-slug>[bot]``, or the token's owner.

        Only comments by this login can be the bot's own: anyone can write the marker.
        """
        use_app = bool(self.settings.github_app_id) and installation_id is not None
        with self._lock:
            known = self._logins.get(use_app)
        if known is not None:
            return known
        if use_app:
            login = f"{self.integration().get_app().slug}[bot]"
        else:
            login = self.for_installation(installation_id).get_user().login
        with self._lock:
            return self._logins.setdefault(use_app, login)

    def forget(self, installation_id: int) -> None:
        """Drop the cached client of a removed installation."""
        with self._lock:
            self._clients.pop(installation_id, None)

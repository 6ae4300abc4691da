"""The Jira client: Cloud (email + API token) or Data Center (personal access token)."""

from __future__ import annotations

import threading

from jira import JIRA

from bot.config import Settings
from bot.github import NotConfigured


class JiraClient:
    """Builds the `jira` client once, on first use."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._lock = threading.Lock()
        self._client: JIRA | None = None

    def missing(self) -> str | None:
        """The settings to set for Jira calls to work, or None when they are set."""
        settings = self.settings
        if not settings.jira_url:
            return "JIRA_URL (with JIRA_EMAIL + JIRA_API_TOKEN, or JIRA_PAT)"
        if settings.jira_pat or (settings.jira_email and settings.jira_api_token):
            return None
        return "JIRA_EMAIL + JIRA_API_TOKEN (Cloud) or JIRA_PAT (Data Center)"

    @property
    def configured(self) -> bool:
        """Whether Jira credentials are set."""
        return self.missing() is None

    def client(self) -> JIRA:
        """The shared client; raises NotConfigured naming the missing setting."""
        missing = self.missing()
        if missing is not None:
            raise NotConfigured(f"Jira is not configured: set {missing}")
        with self._lock:
            if self._client is None:
                settings = self.settings
                auth: dict[str, object] = (
                    {"token_auth": settings.jira_pat}
                    if settings.jira_pat
                    else {"basic_auth": (settings.jira_email, settings.jira_api_token)}
                )
                self._client = JIRA(
                    server=settings.jira_url,
                    get_server_info=False,
                    # The worker retries with backoff; the client's own sleeps would only
                    # hold a worker thread hostage.
                    max_retries=0,
                    timeout=settings.http_timeout_seconds,
                    **auth,  # type: ignore[arg-type]
                )
            return self._client

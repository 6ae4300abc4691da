"""The Jira client: Cloud (email + API token) or Data Center (personal access token).

Jira is called through the `jira` library's public API; the few calls it has no public
method for go through bot/jira_rest.py, never through the library's private attributes.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

from jira import JIRA

from bot.config import Settings
from bot.github import NotConfigured
from bot.jira_rest import JiraRest

# The comment property the bot marks its own comments with (Jira wiki markup has no hidden
# comment syntax, but every comment can carry properties, set in the same POST).
PROPERTY = "playbook-bot"


@dataclass(frozen=True)
class JiraAuthor:
    """Who wrote a comment, as Jira's API says: ids to match settings against, and a name."""

    ids: frozenset[str]  # accountId (Cloud), key and name (Data Center)
    account_id: str | None
    name: str | None
    display: str


def author_of(raw: dict[str, Any] | None) -> JiraAuthor:
    """The author of a comment in Jira's REST shape."""
    raw = raw or {}
    account_id = raw.get("accountId") if isinstance(raw.get("accountId"), str) else None
    key = raw.get("key") if isinstance(raw.get("key"), str) else None
    name = raw.get("name") if isinstance(raw.get("name"), str) else None
    return JiraAuthor(
        ids=frozenset(v for v in (account_id, key) if v),
        account_id=account_id,
        name=name,
        display=str(raw.get("displayName") or name or account_id or "someone"),
    )


class JiraClient:
    """Builds the `jira` client once, on first use."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._lock = threading.Lock()
        self._client: JIRA | None = None
        self._rest: JiraRest | None = None
        self._myself: JiraAuthor | None = None

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

    def myself(self) -> JiraAuthor:
        """The bot's own Jira account (cached): only its comments can be the bot's."""
        if self._myself is None:
            self._myself = author_of(self.client().myself())
        return self._myself

    def rest(self) -> JiraRest:
        """The adapter for the REST calls the library has no public method for."""
        missing = self.missing()
        if missing is not None:
            raise NotConfigured(f"Jira is not configured: set {missing}")
        with self._lock:
            if self._rest is None:
                settings = self.settings
                self._rest = JiraRest(
                    settings.jira_url or "",
                    timeout=settings.http_timeout_seconds,
                    pat=settings.jira_pat,
                    basic=None
                    if settings.jira_pat
                    else (settings.jira_email or "", settings.jira_api_token or ""),
                )
            return self._rest

    def comments(self, key: str) -> list[dict[str, Any]]:
        """Every comment on an issue, in Jira's REST shape, page by page."""
        client = self.client()
        found: list[dict[str, Any]] = []
        while True:
            # Until an empty page: a server may cap a page below what was asked for.
            page = client.comments(key, start_at=len(found), max_results=100)
            if not page:
                return found
            found.extend(comment.raw for comment in page)

    def comment(self, key: str, comment_id: str) -> dict[str, Any]:
        """One comment as Jira has it (author and body from Jira itself, not a payload)."""
        return self.client().comment(key, comment_id).raw

    def marker_of(self, comment_id: str) -> str | None:
        """The bot's marker stored on a comment, or None."""
        value = self.rest().comment_property(comment_id, PROPERTY)
        marker = value.get("marker") if isinstance(value, dict) else None
        return marker if isinstance(marker, str) else None

    def add_comment(self, key: str, body: str, marker: str) -> str:
        """Post a comment carrying ``marker`` as a comment property; returns its id.

        The property travels in the same POST (as the jira library does for service-desk
        visibility), so a comment never exists without its marker.
        """
        return self.rest().add_comment(key, body, {PROPERTY: {"marker": marker}})

    def has_permission(self, project: str, author: JiraAuthor, permission: str) -> bool:
        """Whether ``author`` holds a project permission (Jira's "find users with permissions").

        Needs the bot account to see users of the project (Administer Projects there).
        """
        if not (author.account_id or author.name):
            return False
        users = self.rest().users_with_permission(
            project, permission, account_id=author.account_id, username=author.name
        )
        return any(author_of(user).ids & author.ids for user in users)

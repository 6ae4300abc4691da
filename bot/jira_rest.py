"""The Jira REST calls the `jira` library has no public method for, in one small adapter.

Everything else goes through the library's public API (bot/jira.py). These three go
straight to Jira's REST v2 with a session built from our own credentials, so nothing
depends on the library's private attributes; tests/bot/test_jira_rest.py fails if a path or a
shape we rely on changes:

- ``POST issue/{key}/comment`` with ``properties``: a comment and its marker in one request
  (the library's ``add_comment`` only sets the service-desk property);
- ``GET comment/{id}/properties/{key}``: a comment property;
- ``GET user/permission/search``: Jira's "find users with permissions".

Errors are raised as the library's public ``JIRAError``, so they are classified (retry,
rate limit, permanent) like every other Jira call.
"""

from __future__ import annotations

import json
from typing import Any

import requests
from jira.exceptions import JIRAError

API = "rest/api/2"


class JiraRest:
    """Jira's REST v2 at ``server``, authenticated as the bot (Cloud basic auth or a PAT)."""

    def __init__(
        self,
        server: str,
        *,
        timeout: float,
        pat: str | None = None,
        basic: tuple[str, str] | None = None,
    ) -> None:
        self.base = f"{server.rstrip('/')}/{API}"
        self.timeout = timeout
        self.session = requests.Session()
        self.session.headers.update(
            {
                "Accept": "application/json",
                "Content-Type": "application/json",
                # Jira refuses writes that look like a browser form without it (XSRF check).
                "X-Atlassian-Token": "no-check",
            }
        )
        if pat:
            self.session.headers["Authorization"] = f"Bearer {pat}"
        elif basic is not None:
            self.session.auth = basic

    def _call(self, method: str, path: str, **kwargs: Any) -> Any:
        url = f"{self.base}/{path}"
        response = self.session.request(method, url, timeout=self.timeout, **kwargs)
        if not response.ok:
            raise JIRAError(
                _message(response),
                status_code=response.status_code,
                url=url,
                response=response,
            )
        return json.loads(response.text) if response.text.strip() else {}

    def add_comment(self, key: str, body: str, properties: dict[str, Any]) -> str:
        """Post a comment with comment properties set in the same request; returns its id."""
        data = {
            "body": body,
            "properties": [{"key": name, "value": value} for name, value in properties.items()],
        }
        return str(self._call("POST", f"issue/{key}/comment", data=json.dumps(data))["id"])

    def comment_property(self, comment_id: str, name: str) -> Any:
        """A comment property's value, or None when the comment has no such property."""
        try:
            found = self._call("GET", f"comment/{comment_id}/properties/{name}")
        except JIRAError as error:
            if error.status_code == 404:
                return None
            raise
        return found.get("value") if isinstance(found, dict) else None

    def users_with_permission(
        self, project: str, permission: str, *, account_id: str | None, username: str | None
    ) -> list[dict[str, Any]]:
        """The users matching ``account_id`` (Cloud) or ``username`` (Data Center) that hold
        ``permission`` in ``project``."""
        params = {"permissions": permission, "projectKey": project}
        if account_id:
            params["accountId"] = account_id
        elif username:
            params["username"] = username
        users = self._call("GET", "user/permission/search", params=params)
        return [user for user in users if isinstance(user, dict)] if isinstance(users, list) else []


def _message(response: requests.Response) -> str:
    """Jira's error messages from an error answer, or its status line."""
    try:
        data = json.loads(response.text)
    except ValueError:
        return response.text.strip()[:300] or response.reason or "no message"
    if isinstance(data, dict):
        messages = [str(m) for m in data.get("errorMessages") or []]
        errors = data.get("errors")
        if isinstance(errors, dict):
            messages += [f"{k}: {v}" for k, v in errors.items()]
        if messages:
            return "; ".join(messages)
    return response.reason or "no message"

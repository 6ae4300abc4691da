"""A fake Jira REST v2 API: server info, issues, comments and fields, with basic or PAT auth."""

from __future__ import annotations

import base64
import itertools
import time
from datetime import UTC, datetime
from typing import Any

from flask import request

from tests.fakes.server import FakeServer

# The account the bot's credentials belong to, as Jira Cloud describes it.
BOT = {"accountId": "bot", "key": "bot", "name": "playbook-bot", "displayName": "playbook-bot"}


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.000+0000")


class FakeJira(FakeServer):
    """Enough of a Jira Cloud/Data Center REST v2 API for the `jira` client."""

    def __init__(self, *, email: str = "bot@example.com", api_token: str = "jira-token") -> None:
        super().__init__("fake-jira")
        self.basic = (email, api_token)
        self.pats: set[str] = set()
        self.issues: dict[str, dict[str, Any]] = {}
        self.comments: dict[str, list[dict[str, Any]]] = {}
        # Comment properties by comment id, and who holds which project permissions.
        self.properties: dict[str, dict[str, Any]] = {}
        self.project_permissions: dict[tuple[str, str], set[str]] = {}
        # Seconds the comment POST sleeps after storing the comment (a peer slower than
        # the client's timeout: the comment exists, the client never hears so).
        self.post_delay = 0.0
        self.fields: list[dict[str, Any]] = [
            {"id": "summary", "name": "Summary", "custom": False},
            {"id": "customfield_10090", "name": "Needs human review", "custom": True},
        ]
        self._ids = itertools.count(20000)
        self._routes()

    def add_issue(self, key: str, summary: str, description: str | None = None, **fields: Any):
        """An issue in the REST v2 shape."""
        issue = {
            "id": str(next(self._ids)),
            "key": key,
            "self": f"{self.url}/rest/api/2/issue/{key}",
            "fields": {
                "summary": summary,
                "description": description,
                "labels": fields.pop("labels", []),
                "project": {"key": key.split("-", maxsplit=1)[0]},
                **fields,
            },
        }
        self.issues[key] = issue
        self.comments.setdefault(key, [])
        return issue

    def add_comment(self, key: str, body: str, author: dict[str, Any] | None = None) -> str:
        """A comment written by someone (a person, by default), as Jira stores it."""
        comment = {
            "id": str(next(self._ids)),
            "body": body,
            "author": author or {"accountId": "someone", "displayName": "Someone"},
            "created": _now(),
            "updated": _now(),
        }
        self.comments.setdefault(key, []).append(comment)
        return comment["id"]

    def _authorized(self) -> bool:
        scheme, _, credential = request.headers.get("Authorization", "").partition(" ")
        if scheme.lower() == "bearer":
            return credential.strip() in self.pats
        if scheme.lower() == "basic":
            try:
                user, _, password = base64.b64decode(credential).decode().partition(":")
            except ValueError:
                return False
            return (user, password) == self.basic
        return False

    def _comment_json(self, key: str, comment: dict[str, Any]) -> dict[str, Any]:
        return {
            "id": comment["id"],
            "self": f"{self.url}/rest/api/2/issue/{key}/comment/{comment['id']}",
            "body": comment["body"],
            "author": comment.get("author", BOT),
            "created": comment["created"],
            "updated": comment["updated"],
        }

    def _routes(self) -> None:
        app = self.app
        not_found = ({"errorMessages": ["Issue does not exist"], "errors": {}}, 404)

        @app.before_request
        def _auth() -> Any:
            if request.path == "/rest/api/2/serverInfo":
                return None
            if not self._authorized():
                return {"errorMessages": ["You are not authenticated."], "errors": {}}, 401
            return None

        @app.get("/rest/api/2/serverInfo")
        def server_info() -> Any:
            return {
                "baseUrl": self.url,
                "version": "1001.0.0-SNAPSHOT",
                "versionNumbers": [1001, 0, 0],
                "deploymentType": "Cloud",
                "serverTitle": "Fake Jira",
            }

        @app.get("/rest/api/2/myself")
        def myself() -> Any:
            return {**BOT, "emailAddress": self.basic[0]}

        @app.get("/rest/api/2/comment/<comment_id>/properties/<name>")
        def comment_property(comment_id: str, name: str) -> Any:
            value = self.properties.get(comment_id, {}).get(name)
            if value is None:
                return {"errorMessages": ["The property was not found."], "errors": {}}, 404
            return {"key": name, "value": value}

        @app.get("/rest/api/2/user/permission/search")
        def users_with_permission() -> Any:
            project = request.args.get("projectKey", "")
            wanted = set(request.args.get("permissions", "").split(","))
            account = request.args.get("accountId") or request.args.get("username") or ""
            held = self.project_permissions.get((project, account), set())
            if account and wanted <= held:
                return [{"accountId": account, "displayName": account}]
            return []

        @app.get("/rest/api/2/field")
        def fields() -> Any:
            return self.fields

        @app.get("/rest/api/2/issue/<key>")
        def get_issue(key: str) -> Any:
            issue = self.issues.get(key)
            return issue if issue else not_found

        @app.route("/rest/api/2/issue/<key>/comment", methods=["GET", "POST"])
        def comments(key: str) -> Any:
            if key not in self.issues:
                return not_found
            if request.method == "GET":
                every = [self._comment_json(key, c) for c in self.comments[key]]
                start = int(request.args.get("startAt", 0))
                size = int(request.args.get("maxResults", 50))
                return {
                    "startAt": start,
                    "maxResults": size,
                    "total": len(every),
                    "comments": every[start : start + size],
                }
            body = (request.get_json(silent=True) or {}).get("body")
            if not isinstance(body, str) or not body:
                return {
                    "errorMessages": [],
                    "errors": {"body": "Comment body can not be empty!"},
                }, 400
            comment = {
                "id": str(next(self._ids)),
                "body": body,
                "author": BOT,
                "created": _now(),
                "updated": _now(),
            }
            self.comments[key].append(comment)
            for prop in (request.get_json(silent=True) or {}).get("properties") or []:
                self.properties.setdefault(comment["id"], {})[prop["key"]] = prop["value"]
            if self.post_delay:
                time.sleep(self.post_delay)
            return self._comment_json(key, comment), 201

        @app.route("/rest/api/2/issue/<key>/comment/<comment_id>", methods=["GET", "PUT"])
        def comment(key: str, comment_id: str) -> Any:
            found = [c for c in self.comments.get(key, []) if c["id"] == comment_id]
            if not found:
                return not_found
            if request.method == "PUT":
                body = (request.get_json(silent=True) or {}).get("body")
                if not isinstance(body, str) or not body:
                    return {"errorMessages": [], "errors": {"body": "empty"}}, 400
                found[0]["body"] = body
                found[0]["updated"] = _now()
            return self._comment_json(key, found[0])

"""A fake GitHub REST API: App installation tokens, issues, comments, reactions, permissions, pulls,
hooks.

Contents, branches, the git database and PR writes live in ``tests/fakes/github_git.py``.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import secrets
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import jwt
from flask import request

from tests.fakes.github_apps import AppManifestRoutes
from tests.fakes.github_git import GitRoutes
from tests.fakes.github_reviews import ReviewRoutes
from tests.fakes.server import FakeServer


def _iso(value: datetime) -> str:
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class FakeGitHub(AppManifestRoutes, ReviewRoutes, GitRoutes, FakeServer):
    """Enough of api.github.com for PyGithub, with state tests can seed and inspect."""

    def __init__(self, *, app_id: int | None = None, public_key: str | None = None) -> None:
        super().__init__("fake-github")
        self.app_id = app_id
        self.public_key = public_key
        self.personal_tokens: set[str] = set()
        self.installations: dict[int, dict[str, Any]] = {}
        self.tokens: dict[str, int] = {}  # installation token -> installation id
        self.repos: dict[str, dict[str, Any]] = {}
        self.issues: dict[tuple[str, int], dict[str, Any]] = {}
        self.comments: dict[int, dict[str, Any]] = {}
        # Each issue comment's reactions, oldest first, as GitHub lists them.
        self.reactions: dict[int, list[dict[str, Any]]] = {}
        self.permissions: dict[tuple[str, str], str] = {}
        self.pulls: dict[tuple[str, int], dict[str, Any]] = {}
        self.pull_commits: dict[tuple[str, int], list[str]] = {}
        # A PR's changed files as GitHub lists them: sha, filename, status, additions,
        # deletions, changes and patch (missing for a binary file).
        self.pull_files: dict[tuple[str, int], list[dict[str, Any]]] = {}
        self.hook_deliveries: list[dict[str, Any]] = []
        self.redelivered: list[int] = []
        # Seconds the comment POST sleeps after storing the comment (a peer slower than
        # the client's timeout: the comment exists, the client never hears so).
        self.post_delay = 0.0
        self._ids = itertools.count(9000)
        self._routes()
        self._init_git()
        self._init_reviews()
        self._init_manifest_flow()

    # --- seeding ---------------------------------------------------------------------------

    def add_installation(self, installation_id: int, account: str = "octo-org") -> None:
        """An installation of the App."""
        self.installations[installation_id] = {"id": installation_id, "account": {"login": account}}

    def add_repo(self, full_name: str, *, private: bool = False) -> dict[str, Any]:
        """A repository (public unless ``private``)."""
        owner, name = full_name.split("/")
        repo = {
            "id": next(self._ids),
            "name": name,
            "full_name": full_name,
            "owner": {"login": owner, "id": 1, "type": "Organization"},
            "private": private,
            "visibility": "private" if private else "public",
            "default_branch": "main",
            "url": f"{self.url}/repos/{full_name}",
            "html_url": f"https://github.com/{full_name}",
        }
        self.repos[full_name] = repo
        self._store(full_name)  # main, with an initial commit
        return repo

    def add_issue(self, full_name: str, number: int, title: str, body: str = "", **extra: Any):
        """An issue (GitHub issues carry their labels as objects)."""
        if full_name not in self.repos:
            self.add_repo(full_name)
        issue = {
            "id": next(self._ids),
            "number": number,
            "title": title,
            "body": body,
            "state": "open",
            "labels": [{"name": name} for name in extra.pop("labels", [])],
            "user": {"login": extra.pop("user", "octocat")},
            "url": f"{self.url}/repos/{full_name}/issues/{number}",
            "html_url": f"https://github.com/{full_name}/issues/{number}",
            "comments_url": f"{self.url}/repos/{full_name}/issues/{number}/comments",
            "repository_url": f"{self.url}/repos/{full_name}",
            **extra,
        }
        self.issues[(full_name, number)] = issue
        return issue

    def add_pull(self, full_name: str, number: int, *, title: str, body: str = "", **extra: Any):
        """A pull request; also an issue, as on GitHub (whose ``closed_by`` names the closer).

        ``merged_by`` is a login, as the single-PR endpoint shows it; GitHub's list of PRs
        leaves it out, and so does this fake's.
        """
        closed_by = extra.pop("closed_by", None)
        merged_by = extra.pop("merged_by", None)
        issue = self.add_issue(full_name, number, title, body)
        if closed_by is not None:
            issue["closed_by"] = {"login": closed_by, "type": "User"}
        pull = {
            "id": next(self._ids),
            "number": number,
            "title": title,
            "body": body,
            "state": extra.pop("state", "open"),
            "merged": extra.pop("merged", False),
            "merged_at": extra.pop("merged_at", None),
            "closed_at": extra.pop("closed_at", None),
            "updated_at": extra.pop("updated_at", _iso(datetime.now(UTC))),
            "labels": [{"name": name} for name in extra.pop("labels", [])],
            "head": {
                "ref": extra.pop("head_ref", f"feature-{number}"),
                "sha": extra.pop("head_sha", f"{number:040x}"),
            },
            "merge_commit_sha": extra.pop("merge_commit_sha", None),
            "base": {"ref": "main", "repo": self.repos[full_name]},
            "user": {"login": extra.pop("user", "agent-bot")},
            "url": f"{self.url}/repos/{full_name}/pulls/{number}",
            "html_url": f"https://github.com/{full_name}/pull/{number}",
            "issue_url": f"{self.url}/repos/{full_name}/issues/{number}",
            **extra,
        }
        if merged_by is not None:
            pull["_merged_by"] = {"login": merged_by, "type": "User"}
        self.pulls[(full_name, number)] = pull
        return pull

    def add_comment(self, full_name: str, number: int, body: str, user: str) -> dict[str, Any]:
        """A comment written by a person (not the bot)."""
        comment_id = next(self._ids)
        kind = "pull" if (full_name, number) in self.pulls else "issues"
        comment = {
            "id": comment_id,
            "body": body,
            "user": {"login": user, "type": "Bot" if user.endswith("[bot]") else "User"},
            "performed_via_github_app": None,
            "html_url": f"https://github.com/{full_name}/{kind}/{number}#issuecomment-{comment_id}",
            "created_at": _iso(datetime.now(UTC)),
            "updated_at": _iso(datetime.now(UTC)),
            "_issue": (full_name, number),
        }
        self.comments[comment_id] = comment
        return comment

    def add_reaction(
        self, comment_id: int, user: str, content: str, *, at: datetime | None = None
    ) -> dict[str, Any]:
        """A reaction on an issue comment (``+1``, ``-1``, ``heart``...), as GitHub lists it."""
        reaction = {
            "id": next(self._ids),
            "node_id": f"REA_{secrets.token_hex(6)}",
            "user": {
                "login": user,
                "id": int(hashlib.sha1(user.encode()).hexdigest()[:7], 16),
                "type": "Bot" if user.endswith("[bot]") else "User",
            },
            "content": content,
            "created_at": _iso(at or datetime.now(UTC)),
        }
        self.reactions.setdefault(comment_id, []).append(reaction)
        return reaction

    def remove_reaction(self, comment_id: int, user: str, content: str) -> None:
        """Take a person's reaction back."""
        self.reactions[comment_id] = [
            r
            for r in self.reactions.get(comment_id, [])
            if not (r["user"]["login"] == user and r["content"] == content)
        ]

    def add_pull_file(
        self,
        full_name: str,
        number: int,
        filename: str,
        patch: str | None,
        status="modified",
        previous: str | None = None,
        previous_filename: str | None = None,
    ) -> dict[str, Any]:
        """A file the PR changes, its counts taken from ``patch`` (None: a binary file);
        ``previous`` (or ``previous_filename``) is a renamed file's old path."""
        previous = previous or previous_filename
        lines = (patch or "").splitlines()
        added = sum(1 for line in lines if line.startswith("+"))
        deleted = sum(1 for line in lines if line.startswith("-"))
        changed = {
            "sha": f"{next(self._ids):040x}",
            "filename": filename,
            "status": status,
            "additions": added,
            "deletions": deleted,
            "changes": added + deleted,
            "blob_url": f"https://github.com/{full_name}/blob/main/{filename}",
            "raw_url": f"https://github.com/{full_name}/raw/main/{filename}",
            "contents_url": f"{self.url}/repos/{full_name}/contents/{filename}",
        }
        if patch is not None:
            changed["patch"] = patch
        if previous is not None:
            changed["previous_filename"] = previous
        self.pull_files.setdefault((full_name, number), []).append(changed)
        return changed

    def comments_on(self, full_name: str, number: int) -> list[dict[str, Any]]:
        """The comments on an issue or PR, oldest first."""
        return [c for c in self.comments.values() if c["_issue"] == (full_name, number)]

    # --- auth ------------------------------------------------------------------------------

    def _authorized(self) -> bool:
        scheme, _, credential = request.headers.get("Authorization", "").partition(" ")
        credential = credential.strip()
        if scheme.lower() in ("token", "bearer"):
            if credential in self.personal_tokens:
                return True
            installation = self.tokens.get(credential)
            return installation is not None and installation in self.installations
        return False

    def _via_app(self) -> dict[str, Any] | None:
        _, _, credential = request.headers.get("Authorization", "").partition(" ")
        if self.app_id is None or credential.strip() not in self.tokens:
            return None
        return {"id": self.app_id, "slug": "playbook-bot", "name": "playbook-bot"}

    def _app_jwt_valid(self) -> bool:
        scheme, _, token = request.headers.get("Authorization", "").partition(" ")
        if scheme.lower() != "bearer" or self.public_key is None:
            return False
        try:
            claims = jwt.decode(token.strip(), self.public_key, algorithms=["RS256"])
        except jwt.PyJWTError:
            return False
        return str(claims.get("iss")) == str(self.app_id)

    # --- routes ----------------------------------------------------------------------------

    def _routes(self) -> None:
        app = self.app
        unauthorized = ({"message": "Bad credentials"}, 401)
        not_found = ({"message": "Not Found"}, 404)

        @app.before_request
        def _auth() -> Any:
            if self.open_path(request.path):
                return None
            # App-level endpoints take the App's JWT, everything else an installation token.
            if request.path.startswith("/app") or request.path.endswith("/installation"):
                return None if self._app_jwt_valid() else unauthorized
            return None if self._authorized() else unauthorized

        @app.post("/app/installations/<int:installation_id>/access_tokens")
        def access_token(installation_id: int) -> Any:
            if installation_id not in self.installations:
                return not_found
            token = "ghs_" + secrets.token_hex(16)
            self.tokens[token] = installation_id
            expires = datetime.now(UTC) + timedelta(hours=1)
            return {"token": token, "expires_at": _iso(expires), "permissions": {}}, 201

        @app.get("/app/installations")
        def list_installations() -> Any:
            return _page([{"id": i, **data} for i, data in self.installations.items()])

        @app.get("/app")
        def get_app() -> Any:
            return {"id": self.app_id, "slug": "playbook-bot", "name": "playbook-bot"}

        @app.get("/repos/<owner>/<name>/installation")
        def repo_installation(owner: str, name: str) -> Any:
            if f"{owner}/{name}" not in self.repos or not self.installations:
                return not_found
            installation_id = next(iter(self.installations))
            return {"id": installation_id, "account": {"login": owner}, "app_id": self.app_id}

        @app.get("/user")
        def get_user() -> Any:
            return {"login": "token-owner", "id": 7}

        @app.get("/repos/<owner>/<name>")
        def get_repo(owner: str, name: str) -> Any:
            repo = self.repos.get(f"{owner}/{name}")
            return repo if repo else not_found

        @app.get("/repos/<owner>/<name>/issues/<int:number>")
        def get_issue(owner: str, name: str, number: int) -> Any:
            issue = self.issues.get((f"{owner}/{name}", number))
            return issue if issue else not_found

        @app.get("/repos/<owner>/<name>/issues/<int:number>/comments")
        def list_comments(owner: str, name: str, number: int) -> Any:
            return [_public(c) for c in self.comments_on(f"{owner}/{name}", number)]

        @app.post("/repos/<owner>/<name>/issues/<int:number>/comments")
        def create_comment(owner: str, name: str, number: int) -> Any:
            full_name = f"{owner}/{name}"
            if (full_name, number) not in self.issues:
                return not_found
            body = (request.get_json(silent=True) or {}).get("body")
            if not isinstance(body, str) or not body:
                return {"message": "Validation Failed"}, 422
            comment_id = next(self._ids)
            comment = {
                "id": comment_id,
                "body": body,
                "user": {"login": "playbook-bot[bot]", "type": "Bot"},
                # As GitHub says it: the App when an installation token posted, else null.
                "performed_via_github_app": self._via_app(),
                "url": f"{self.url}/repos/{full_name}/issues/comments/{comment_id}",
                "html_url": f"https://github.com/{full_name}/issues/{number}#issuecomment-{comment_id}",
                "issue_url": f"{self.url}/repos/{full_name}/issues/{number}",
                "created_at": _iso(datetime.now(UTC)),
                "updated_at": _iso(datetime.now(UTC)),
                "_issue": (full_name, number),
            }
            self.comments[comment_id] = comment
            if self.post_delay:
                time.sleep(self.post_delay)
            return _public(comment), 201

        @app.route(
            "/repos/<owner>/<name>/issues/comments/<int:comment_id>", methods=["GET", "PATCH"]
        )
        def comment(owner: str, name: str, comment_id: int) -> Any:
            existing = self.comments.get(comment_id)
            if existing is None or existing["_issue"][0] != f"{owner}/{name}":
                return not_found
            if request.method == "PATCH":
                body = (request.get_json(silent=True) or {}).get("body")
                if not isinstance(body, str) or not body:
                    return {"message": "Validation Failed"}, 422
                existing["body"] = body
                existing["updated_at"] = _iso(datetime.now(UTC))
            return _public(existing)

        @app.get("/repos/<owner>/<name>/issues/comments/<int:comment_id>/reactions")
        def comment_reactions(owner: str, name: str, comment_id: int) -> Any:
            # As GitHub answers: 404 once the comment is gone; an optional `content` filter;
            # pages of at most 100; an ETag per answer, and 304 with no body when the
            # client's If-None-Match still matches (which GitHub does not count against the
            # rate limit).
            existing = self.comments.get(comment_id)
            if existing is None or existing["_issue"][0] != f"{owner}/{name}":
                return not_found
            content = request.args.get("content")
            listed = [
                r
                for r in self.reactions.get(comment_id, [])
                if not content or r["content"] == content
            ]
            chunk, status, headers = _page(listed)
            digest = hashlib.sha1(
                json.dumps([chunk, headers.get("Link")], sort_keys=True).encode()
            ).hexdigest()
            etag = f'W/"{digest}"'
            headers["ETag"] = etag
            if etag in [t.strip() for t in request.headers.get("If-None-Match", "").split(",")]:
                return "", 304, headers
            return chunk, status, headers

        @app.get("/repos/<owner>/<name>/collaborators/<user>/permission")
        def permission(owner: str, name: str, user: str) -> Any:
            # As GitHub answers: `permissions` holds the role; `permission` is the legacy level,
            # where maintain reads as write and triage as read.
            role = self.permissions.get((f"{owner}/{name}", user), "none")
            level = {"maintain": "write", "triage": "read"}.get(role, role)
            return {"permission": level, "role_name": role, "user": {"login": user}}

        @app.get("/repos/<owner>/<name>/pulls")
        def list_pulls(owner: str, name: str) -> Any:
            full_name = f"{owner}/{name}"
            state = request.args.get("state", "open")
            # head is "owner:branch" (GitHub ignores a head without the owner's login)
            head, base = request.args.get("head"), request.args.get("base")
            pulls = [
                p
                for (repo, _), p in self.pulls.items()
                if repo == full_name
                and (state == "all" or p["state"] == state)
                and (not head or ":" not in head or _label(p) == head)
                and (not base or p["base"].get("ref") == base)
            ]
            pulls.sort(
                key=lambda p: p["updated_at"], reverse=request.args.get("direction") != "asc"
            )
            return _page([_public(p) for p in pulls])

        @app.get("/repos/<owner>/<name>/pulls/<int:number>")
        def get_pull(owner: str, name: str, number: int) -> Any:
            pull = self.pulls.get((f"{owner}/{name}", number))
            if not pull:
                return not_found
            shown = _public(pull)
            if "_merged_by" in pull:
                shown["merged_by"] = pull["_merged_by"]
            return shown

        @app.get("/repos/<owner>/<name>/pulls/<int:number>/commits")
        def pull_commits(owner: str, name: str, number: int) -> Any:
            messages = self.pull_commits.get((f"{owner}/{name}", number), [])
            return _page(
                [
                    {"sha": f"{i:040x}", "commit": {"message": message}}
                    for i, message in enumerate(messages, start=1)
                ]
            )

        @app.get("/repos/<owner>/<name>/pulls/<int:number>/files")
        def pull_files(owner: str, name: str, number: int) -> Any:
            full_name = f"{owner}/{name}"
            if (full_name, number) not in self.pulls:
                return not_found
            # "Responses include a maximum of 3000 files" (GitHub's REST docs).
            return _page(list(self.pull_files.get((full_name, number), []))[:3000])

        @app.get("/app/hook/deliveries")
        def hook_deliveries() -> Any:
            return _page(list(reversed(self.hook_deliveries)))

        @app.post("/app/hook/deliveries/<int:delivery_id>/attempts")
        def redeliver(delivery_id: int) -> Any:
            if not any(d["id"] == delivery_id for d in self.hook_deliveries):
                return not_found
            self.redelivered.append(delivery_id)
            return {}, 202


def _label(pull: dict[str, Any]) -> str:
    """A PR head's ``owner:branch`` (seeded PRs carry no label: their repo's owner)."""
    head = pull["head"]
    if "label" in head:
        return head["label"]
    owner = pull["base"]["repo"]["owner"]["login"]
    return f"{owner}:{head['ref']}"


def _public(comment: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in comment.items() if not key.startswith("_")}


def _page(items: list[Any]) -> Any:
    """Paginate like GitHub: per_page/page query parameters and a Link header."""
    per_page = min(int(request.args.get("per_page", 30)), 100)  # GitHub's most
    page = int(request.args.get("page", 1))
    chunk = items[(page - 1) * per_page : page * per_page]
    headers = {}
    if page * per_page < len(items):
        query = request.args.to_dict() | {"page": str(page + 1), "per_page": str(per_page)}
        next_url = request.base_url + "?" + "&".join(f"{k}={v}" for k, v in query.items())
        headers["Link"] = f'<{next_url}>; rel="next"'
    return chunk, 200, headers

"""The fake GitHub's review feedback: a PR's reviews and its review comments on lines."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime
from typing import Any

# Review ids of their own: GitHub numbers reviews and comments apart.
_IDS = itertools.count(70_000)


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _user(login: str) -> dict[str, Any]:
    """A user object as GitHub shows it in a list: login and type, an App's as a Bot."""
    return {"login": login, "id": abs(hash(login)) % 10**6, "type": _type(login)}


def _type(login: str) -> str:
    return "Bot" if login.endswith("[bot]") else "User"


class ReviewRoutes:
    """Mixin for FakeGitHub: `GET /repos/{o}/{r}/pulls/{n}/reviews` and `.../comments`."""

    app: Any
    url: str

    def _init_reviews(self) -> None:
        self.reviews: dict[tuple[str, int], list[dict[str, Any]]] = {}
        self.review_comments: dict[tuple[str, int], list[dict[str, Any]]] = {}
        self._review_routes()

    def add_review(
        self,
        full_name: str,
        number: int,
        body: str,
        user: str,
        state: str = "CHANGES_REQUESTED",
        *,
        user_type: str | None = None,
    ) -> dict[str, Any]:
        """A review of a PR, as `GET .../pulls/{n}/reviews` lists it."""
        review_id = next(_IDS)
        review = {
            "id": review_id,
            "node_id": f"PRR_{review_id}",
            "user": {**_user(user), **({"type": user_type} if user_type else {})},
            "body": body,
            "state": state,
            "html_url": f"https://github.com/{full_name}/pull/{number}#pullrequestreview-{review_id}",
            "pull_request_url": f"{self.url}/repos/{full_name}/pulls/{number}",
            "submitted_at": _now(),
            "commit_id": f"{number:040x}",
            "author_association": "MEMBER",
        }
        self.reviews.setdefault((full_name, number), []).append(review)
        return review

    def add_review_comment(
        self, full_name: str, number: int, body: str, user: str, *, path: str = "app.py", line=1
    ) -> dict[str, Any]:
        """A review comment on a line of a PR's diff."""
        comment_id = next(_IDS)
        comment = {
            "id": comment_id,
            "node_id": f"PRRC_{comment_id}",
            "user": _user(user),
            "body": body,
            "path": path,
            "line": line,
            "side": "RIGHT",
            "diff_hunk": "@@ -1 +1 @@",
            "commit_id": f"{number:040x}",
            "html_url": f"https://github.com/{full_name}/pull/{number}#discussion_r{comment_id}",
            "url": f"{self.url}/repos/{full_name}/pulls/comments/{comment_id}",
            "pull_request_url": f"{self.url}/repos/{full_name}/pulls/{number}",
            "created_at": _now(),
            "updated_at": _now(),
            "author_association": "MEMBER",
        }
        self.review_comments.setdefault((full_name, number), []).append(comment)
        return comment

    def _review_routes(self) -> None:
        from tests.fakes.github import _page

        app = self.app
        not_found = ({"message": "Not Found"}, 404)
        pulls = self.pulls  # type: ignore[attr-defined]

        @app.get("/repos/<owner>/<name>/pulls/<int:number>/reviews")
        def list_reviews(owner: str, name: str, number: int) -> Any:
            key = (f"{owner}/{name}", number)
            if key not in pulls:
                return not_found
            return _page(list(self.reviews.get(key, [])))

        @app.get("/repos/<owner>/<name>/pulls/<int:number>/comments")
        def list_review_comments(owner: str, name: str, number: int) -> Any:
            key = (f"{owner}/{name}", number)
            if key not in pulls:
                return not_found
            return _page(list(self.review_comments.get(key, [])))

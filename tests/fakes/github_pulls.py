"""The fake GitHub's pull request writes: open, edit, close, reopen, and merge (a test helper)."""

from __future__ import annotations

from typing import Any

from flask import request

from tests.fakes.git_store import invalid, now


class PullWrites:
    """Mixin for FakeGitHub: PRs opened and edited through the API, as GitHub answers them."""

    # Provided by FakeGitHub and GitRoutes.
    app: Any
    repos: dict[str, dict[str, Any]]
    issues: dict[tuple[str, int], dict[str, Any]]
    pulls: dict[tuple[str, int], dict[str, Any]]
    _store: Any
    _move: Any
    _caller: Any
    _api: Any
    _author: Any
    _repo_of: Any
    branch_sha: Any

    def merge_pull(self, full_name: str, number: int, merged_by: str = "octocat") -> str:
        """Merge an open PR made through the API: base moves to a merge commit; returns its sha."""
        pull = self.pulls[(full_name, number)]
        store = self._store(full_name)
        head = store.refs[f"refs/heads/{pull['head']['ref']}"]
        base_ref = f"refs/heads/{pull['base']['ref']}"
        tree = store.objects[head]["tree"]
        message = f"Merge pull request #{number} from {pull['head']['label']}"
        sha = store.commit(tree, [store.refs[base_ref], head], message, self._author())
        self._move(full_name, base_ref, sha)
        pull.update(state="closed", merged=True, merged_at=now(), closed_at=now())
        pull["merge_commit_sha"] = sha
        pull["merged_by"] = {"login": merged_by, "type": "User"}
        self.issues[(full_name, number)].update(state="closed", closed_at=now())
        return sha

    def _pull_part(self, full_name: str, branch: str) -> dict[str, Any]:
        repo = self.repos[full_name]
        return {
            "label": f"{repo['owner']['login']}:{branch}",
            "ref": branch,
            "sha": self._store(full_name).refs.get(f"refs/heads/{branch}"),
            "user": repo["owner"],
            "repo": repo,
        }

    def _pull_routes(self) -> None:
        app = self.app
        repo_of = self._repo_of
        not_found = (
            {"message": "Not Found", "documentation_url": "https://docs.github.com/rest"},
            404,
        )

        @app.post("/repos/<owner>/<name>/pulls")
        def create_pull(owner: str, name: str) -> Any:
            found = repo_of(owner, name)
            if found is None:
                return not_found
            full_name, store = found
            data = request.get_json(silent=True) or {}
            head, base = data.get("head"), data.get("base")
            if not isinstance(head, str) or not isinstance(base, str) or not data.get("title"):
                return invalid("", resource="PullRequest", field="title", code="missing_field")
            head_owner, _, head_branch = head.rpartition(":")
            head_owner = head_owner or owner
            if head_owner != owner or f"refs/heads/{head_branch}" not in store.refs:
                return invalid("", resource="PullRequest", field="head", code="invalid")
            if f"refs/heads/{base}" not in store.refs:
                return invalid("", resource="PullRequest", field="base", code="invalid")
            label = f"{head_owner}:{head_branch}"
            for (repo, _), pull in self.pulls.items():
                if (
                    repo == full_name
                    and pull["state"] == "open"
                    and pull["head"].get("label") == label
                ):
                    message = f"A pull request already exists for {label}."
                    return invalid("", resource="PullRequest", code="custom", message=message)
            head_sha = store.refs[f"refs/heads/{head_branch}"]
            if head_sha in store.ancestors(store.refs[f"refs/heads/{base}"]):
                message = f"No commits between {base} and {head_branch}"
                return invalid("", resource="PullRequest", code="custom", message=message)
            numbers = [n for (repo, n) in [*self.issues, *self.pulls] if repo == full_name]
            number = max(numbers, default=0) + 1
            user = self._caller()
            title, body = data["title"], data.get("body")
            api = self._api(full_name)
            self.issues[(full_name, number)] = {
                "id": number * 1000 + 1,
                "number": number,
                "title": title,
                "body": body,
                "state": "open",
                "labels": [],
                "user": user,
                "url": f"{api}/issues/{number}",
                "html_url": f"https://github.com/{full_name}/pull/{number}",
                "comments_url": f"{api}/issues/{number}/comments",
                "repository_url": api,
                "pull_request": {
                    "url": f"{api}/pulls/{number}",
                    "html_url": f"https://github.com/{full_name}/pull/{number}",
                },
            }
            stamp = now()
            pull = {
                "id": number * 1000 + 2,
                "node_id": f"PR_{number}",
                "number": number,
                "title": title,
                "body": body,
                "state": "open",
                "draft": bool(data.get("draft")),
                "locked": False,
                "merged": False,
                "mergeable": None,
                "merged_at": None,
                "merge_commit_sha": None,
                "closed_at": None,
                "created_at": stamp,
                "updated_at": stamp,
                "labels": [],
                "head": self._pull_part(full_name, head_branch),
                "base": self._pull_part(full_name, base),
                "user": user,
                "author_association": "NONE",
                "url": f"{api}/pulls/{number}",
                "html_url": f"https://github.com/{full_name}/pull/{number}",
                "issue_url": f"{api}/issues/{number}",
                "commits_url": f"{api}/pulls/{number}/commits",
                "comments_url": f"{api}/issues/{number}/comments",
            }
            self.pulls[(full_name, number)] = pull
            return pull, 201

        @app.patch("/repos/<owner>/<name>/pulls/<int:number>")
        def edit_pull(owner: str, name: str, number: int) -> Any:
            full_name = f"{owner}/{name}"
            pull = self.pulls.get((full_name, number))
            if pull is None:
                return not_found
            data = request.get_json(silent=True) or {}
            issue = self.issues.get((full_name, number), {})
            state = data.get("state")
            if state not in (None, "open", "closed"):
                return invalid("", resource="PullRequest", field="state", code="invalid")
            if state == "open" and pull["state"] == "closed":
                if pull.get("merged"):
                    return invalid(
                        "",
                        resource="PullRequest",
                        code="custom",
                        message="Cannot reopen a merged pull request",
                    )
                label = pull["head"].get("label")
                for (repo, other), open_pull in self.pulls.items():
                    if (
                        repo == full_name
                        and other != number
                        and open_pull["state"] == "open"
                        and open_pull["head"].get("label") == label
                    ):
                        return invalid(
                            "",
                            resource="PullRequest",
                            code="custom",
                            message=f"A pull request already exists for {label}.",
                        )
            for key in ("title", "body"):
                if key in data:
                    pull[key] = issue[key] = data[key]
            if state is not None:
                pull["state"] = issue["state"] = state
                pull["closed_at"] = issue["closed_at"] = now() if state == "closed" else None
            if "base" in data:
                if self.branch_sha(full_name, data["base"]) is None:
                    return invalid("", resource="PullRequest", field="base", code="invalid")
                pull["base"] = self._pull_part(full_name, data["base"])
            pull["updated_at"] = now()
            return pull

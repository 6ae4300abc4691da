"""The fake GitHub's contents, branches and git database (refs, blobs, trees, commits)."""

from __future__ import annotations

import base64
import hashlib
from typing import Any

from flask import has_request_context, request

from tests.fakes.git_store import MODES, GitStore, invalid, now
from tests.fakes.github_pulls import PullWrites


class GitRoutes(PullWrites):
    """Mixin for FakeGitHub: the git store per repository, its routes and helpers."""

    # Provided by FakeGitHub.
    app: Any
    url: str
    repos: dict[str, dict[str, Any]]
    issues: dict[tuple[str, int], dict[str, Any]]
    pulls: dict[tuple[str, int], dict[str, Any]]
    tokens: dict[str, int]
    add_repo: Any

    def _init_git(self) -> None:
        self.git: dict[str, GitStore] = {}
        self._git_routes()
        self._pull_routes()

    # --- seeding and inspection --------------------------------------------------------------

    def _store(self, full_name: str) -> GitStore:
        """The repository's store, with ``main`` holding an initial commit (as auto_init does)."""
        store = self.git.get(full_name)
        if store is None:
            store = self.git[full_name] = GitStore()
            name = full_name.split("/")[1]
            blob = store.blob(f"# {name}\n".encode())
            tree = store.build({"README.md": ("100644", blob)})
            branch = (self.repos.get(full_name) or {}).get("default_branch", "main")
            store.refs[f"refs/heads/{branch}"] = store.commit(
                tree, [], "Initial commit", self._author()
            )
        return store

    def put_file(self, full_name: str, path: str, content: bytes, branch: str = "main") -> str:
        """Commit ``content`` at ``path`` on ``branch`` (repo and branch made as needed)."""
        if full_name not in self.repos:
            self.add_repo(full_name)
        store = self._store(full_name)
        base = store.resolve(branch) or store.resolve(self.repos[full_name]["default_branch"])
        assert base is not None
        flat = store.flatten(store.objects[base]["tree"])
        flat[path.strip("/")] = ("100644", store.blob(content))
        sha = store.commit(store.build(flat), [base], f"Update {path}", self._author())
        self._move(full_name, f"refs/heads/{branch}", sha)
        return sha

    def file_at(self, full_name: str, path: str, ref: str = "main") -> bytes | None:
        """The bytes of ``path`` at ``ref``, or None when it is not a file there."""
        if full_name not in self.repos:
            return None
        store = self._store(full_name)
        commit = store.resolve(ref)
        found = store.lookup(commit, path) if commit else None
        if found is None or store.kind(found[1]) != "blob":
            return None
        return store.objects[found[1]]["data"]

    def branch_sha(self, full_name: str, branch: str) -> str | None:
        """The commit ``branch`` points at, or None."""
        if full_name not in self.repos:
            return None
        return self._store(full_name).refs.get(f"refs/heads/{branch}")

    def commits_on(self, full_name: str, branch: str) -> list[str]:
        """The commits of ``branch`` along first parents, newest first."""
        sha = self.branch_sha(full_name, branch)
        store = self.git.get(full_name)
        shas: list[str] = []
        while sha is not None and store is not None:
            shas.append(sha)
            parents = store.objects[sha]["parents"]
            sha = parents[0] if parents else None
        return shas

    # --- helpers -----------------------------------------------------------------------------

    def _caller(self) -> dict[str, Any]:
        """The user an API write is attributed to: the App's bot for an installation token."""
        _, _, credential = request.headers.get("Authorization", "").partition(" ")
        if credential.strip() in self.tokens:
            return {"login": "playbook-bot[bot]", "id": 41898282, "type": "Bot"}
        return {"login": "token-owner", "id": 7, "type": "User"}

    def _author(self, given: dict[str, Any] | None = None) -> dict[str, str]:
        if given and given.get("name") and given.get("email"):
            return {
                "name": given["name"],
                "email": given["email"],
                "date": given.get("date", now()),
            }
        login = self._caller()["login"] if has_request_context() else "octocat"
        return {"name": login, "email": f"{login}@users.noreply.github.com", "date": now()}

    def _move(self, full_name: str, ref: str, sha: str) -> None:
        """Point ``ref`` at ``sha``; open PRs from that branch follow it, as on GitHub."""
        self._store(full_name).refs[ref] = sha
        branch = ref.removeprefix("refs/heads/")
        for (repo, _), pull in self.pulls.items():
            if repo == full_name and pull["state"] == "open":
                if pull["head"].get("ref") == branch:
                    pull["head"]["sha"] = sha
                if pull["base"].get("ref") == branch:
                    pull["base"]["sha"] = sha

    def _repo_of(self, owner: str, name: str) -> tuple[str, GitStore] | None:
        """The repository's name and store, or None when the fake has no such repository."""
        full_name = f"{owner}/{name}"
        if full_name not in self.repos:
            return None
        return full_name, self._store(full_name)

    def _api(self, full_name: str) -> str:
        return f"{self.url}/repos/{full_name}"

    def _ref_json(self, full_name: str, ref: str) -> dict[str, Any]:
        sha = self._store(full_name).refs[ref]
        return {
            "ref": ref,
            "node_id": "REF_" + hashlib.sha1(ref.encode()).hexdigest()[:12],
            "url": f"{self._api(full_name)}/git/{ref}",
            "object": {
                "type": "commit",
                "sha": sha,
                "url": f"{self._api(full_name)}/git/commits/{sha}",
            },
        }

    def _commit_json(self, full_name: str, sha: str) -> dict[str, Any]:
        commit = self._store(full_name).objects[sha]
        api = self._api(full_name)
        return {
            "sha": sha,
            "node_id": "C_" + sha[:12],
            "url": f"{api}/git/commits/{sha}",
            "html_url": f"https://github.com/{full_name}/commit/{sha}",
            "author": commit["author"],
            "committer": commit["committer"],
            "message": commit["message"],
            "tree": {"sha": commit["tree"], "url": f"{api}/git/trees/{commit['tree']}"},
            "parents": [
                {
                    "sha": p,
                    "url": f"{api}/git/commits/{p}",
                    "html_url": f"https://github.com/{full_name}/commit/{p}",
                }
                for p in commit["parents"]
            ],
            "verification": {
                "verified": False,
                "reason": "unsigned",
                "signature": None,
                "payload": None,
            },
        }

    def _entry_json(self, full_name: str, path: str, mode: str, sha: str) -> dict[str, Any]:
        store = self._store(full_name)
        kind = MODES.get(mode, "blob")
        entry = {"path": path, "mode": mode, "type": kind, "sha": sha}
        if kind == "blob":
            entry["size"] = len(store.objects[sha]["data"])
            entry["url"] = f"{self._api(full_name)}/git/blobs/{sha}"
        elif kind == "tree":
            entry["url"] = f"{self._api(full_name)}/git/trees/{sha}"
        return entry

    def _tree_json(self, full_name: str, sha: str, recursive: bool) -> dict[str, Any]:
        store = self._store(full_name)
        entries: list[dict[str, Any]] = []

        def walk(tree_sha: str, prefix: str) -> None:
            for name, (mode, child) in sorted(store.objects[tree_sha]["entries"].items()):
                entries.append(self._entry_json(full_name, prefix + name, mode, child))
                if recursive and mode == "040000":
                    walk(child, f"{prefix}{name}/")

        walk(sha, "")
        return {
            "sha": sha,
            "url": f"{self._api(full_name)}/git/trees/{sha}",
            "tree": entries,
            "truncated": False,
        }

    def _content_json(
        self, full_name: str, path: str, sha: str, ref: str, kind: str
    ) -> dict[str, Any]:
        api, html = self._api(full_name), f"https://github.com/{full_name}"
        store = self._store(full_name)
        size = len(store.objects[sha]["data"]) if kind == "file" else 0
        links = {
            "self": f"{api}/contents/{path}?ref={ref}",
            "git": f"{api}/git/{'blobs' if kind == 'file' else 'trees'}/{sha}",
            "html": f"{html}/{'blob' if kind == 'file' else 'tree'}/{ref}/{path}",
        }
        return {
            "type": kind,
            "size": size,
            "name": path.rsplit("/", 1)[-1],
            "path": path,
            "sha": sha,
            "url": links["self"],
            "git_url": links["git"],
            "html_url": links["html"],
            "download_url": (
                f"https://raw.githubusercontent.com/{full_name}/{ref}/{path}"
                if kind == "file"
                else None
            ),
            "_links": links,
        }

    # --- routes ------------------------------------------------------------------------------

    def _git_routes(self) -> None:
        app = self.app
        not_found = (
            {"message": "Not Found", "documentation_url": "https://docs.github.com/rest"},
            404,
        )

        repo_of = self._repo_of

        @app.get("/repos/<owner>/<name>/contents/", defaults={"path": ""})
        @app.get("/repos/<owner>/<name>/contents/<path:path>")
        def get_contents(owner: str, name: str, path: str) -> Any:
            found = repo_of(owner, name)
            if found is None:
                return not_found
            full_name, store = found
            ref = request.args.get("ref") or self.repos[full_name]["default_branch"]
            commit = store.resolve(ref)
            if commit is None:
                return invalid(f"No commit found for the ref {ref}", 404)
            path = path.strip("/")
            entry = store.lookup(commit, path)
            if entry is None:
                return not_found
            mode, sha = entry
            if mode != "040000":
                data = store.objects[sha]["data"]
                encoded = base64.b64encode(data).decode()
                # GitHub wraps the base64 at 60 characters per line.
                wrapped = "".join(encoded[i : i + 60] + "\n" for i in range(0, len(encoded), 60))
                return self._content_json(full_name, path, sha, ref, "file") | {
                    "encoding": "base64",
                    "content": wrapped,
                }
            items = []
            for child, (child_mode, child_sha) in sorted(store.objects[sha]["entries"].items()):
                kind = "dir" if child_mode == "040000" else "file"
                child_path = f"{path}/{child}" if path else child
                items.append(self._content_json(full_name, child_path, child_sha, ref, kind))
            return items

        @app.put("/repos/<owner>/<name>/contents/<path:path>")
        def put_contents(owner: str, name: str, path: str) -> Any:
            found = repo_of(owner, name)
            if found is None:
                return not_found
            full_name, store = found
            data = request.get_json(silent=True) or {}
            if not isinstance(data.get("message"), str) or not isinstance(data.get("content"), str):
                return invalid('Invalid request.\n\n"message" and "content" are required.')
            branch = data.get("branch") or self.repos[full_name]["default_branch"]
            head = store.refs.get(f"refs/heads/{branch}")
            if head is None:
                return invalid(f"Branch {branch} not found", 404)
            try:
                content = base64.b64decode(data["content"], validate=True)
            except ValueError:
                return invalid("content is not valid Base64")
            path = path.strip("/")
            existing = store.lookup(head, path)
            if existing is not None and existing[0] == "040000":
                return invalid(f"{path} is a directory")
            if existing is not None and "sha" not in data:
                return invalid('Invalid request.\n\n"sha" wasn\'t supplied.')
            if existing is not None and data["sha"] != existing[1]:
                return invalid(f"{path} does not match {data['sha']}", 409)
            flat = store.flatten(store.objects[head]["tree"])
            flat[path] = ("100644", store.blob(content))
            author = self._author(data.get("author") or data.get("committer"))
            sha = store.commit(store.build(flat), [head], data["message"], author)
            self._move(full_name, f"refs/heads/{branch}", sha)
            blob = flat[path][1]
            body = {
                "content": self._content_json(full_name, path, blob, branch, "file"),
                "commit": self._commit_json(full_name, sha),
            }
            return body, (200 if existing else 201)

        @app.get("/repos/<owner>/<name>/branches/<path:branch>")
        def get_branch(owner: str, name: str, branch: str) -> Any:
            found = repo_of(owner, name)
            if found is None:
                return not_found
            full_name, store = found
            sha = store.refs.get(f"refs/heads/{branch}")
            if sha is None:
                return invalid("Branch not found", 404)
            api = self._api(full_name)
            commit = self._commit_json(full_name, sha)
            return {
                "name": branch,
                "commit": {
                    "sha": sha,
                    "node_id": commit["node_id"],
                    "commit": commit,
                    "url": f"{api}/commits/{sha}",
                    "html_url": commit["html_url"],
                    "parents": commit["parents"],
                },
                "_links": {
                    "self": f"{api}/branches/{branch}",
                    "html": f"https://github.com/{full_name}/tree/{branch}",
                },
                "protected": False,
                "protection": {
                    "enabled": False,
                    "required_status_checks": {
                        "enforcement_level": "off",
                        "contexts": [],
                        "checks": [],
                    },
                },
                "protection_url": f"{api}/branches/{branch}/protection",
            }

        @app.get("/repos/<owner>/<name>/git/ref/<path:ref>")
        @app.get("/repos/<owner>/<name>/git/refs/<path:ref>")
        def get_ref(owner: str, name: str, ref: str) -> Any:
            found = repo_of(owner, name)
            if found is None:
                return not_found
            full_name, store = found
            full_ref = ref if ref.startswith("refs/") else f"refs/{ref}"
            if full_ref not in store.refs:
                return not_found
            return self._ref_json(full_name, full_ref)

        @app.post("/repos/<owner>/<name>/git/refs")
        def create_ref(owner: str, name: str) -> Any:
            found = repo_of(owner, name)
            if found is None:
                return not_found
            full_name, store = found
            data = request.get_json(silent=True) or {}
            ref, sha = data.get("ref"), data.get("sha")
            if not isinstance(ref, str) or not ref.startswith("refs/") or ref.count("/") < 2:
                return invalid(
                    "Reference name must start with 'refs/' and have at least two slashes"
                )
            if ref in store.refs:
                return invalid("Reference already exists")
            if not isinstance(sha, str) or store.kind(sha) != "commit":
                return invalid("Object does not exist")
            self._move(full_name, ref, sha)
            return self._ref_json(full_name, ref), 201

        @app.route("/repos/<owner>/<name>/git/refs/<path:ref>", methods=["PATCH", "DELETE"])
        def update_ref(owner: str, name: str, ref: str) -> Any:
            found = repo_of(owner, name)
            if found is None:
                return not_found
            full_name, store = found
            full_ref = ref if ref.startswith("refs/") else f"refs/{ref}"
            if full_ref not in store.refs:
                return invalid("Reference does not exist")
            if request.method == "DELETE":
                del store.refs[full_ref]
                return "", 204
            data = request.get_json(silent=True) or {}
            sha = data.get("sha")
            if not isinstance(sha, str) or store.kind(sha) != "commit":
                return invalid("Object does not exist")
            if not data.get("force") and store.refs[full_ref] not in store.ancestors(sha):
                return invalid("Update is not a fast forward")
            self._move(full_name, full_ref, sha)
            return self._ref_json(full_name, full_ref)

        @app.post("/repos/<owner>/<name>/git/blobs")
        def create_blob(owner: str, name: str) -> Any:
            found = repo_of(owner, name)
            if found is None:
                return not_found
            full_name, store = found
            data = request.get_json(silent=True) or {}
            content, encoding = data.get("content"), data.get("encoding", "utf-8")
            if not isinstance(content, str) or encoding not in ("utf-8", "base64"):
                return invalid("Invalid request.\n\nencoding must be utf-8 or base64")
            try:
                raw = (
                    base64.b64decode(content, validate=True)
                    if encoding == "base64"
                    else content.encode()
                )
            except ValueError:
                return invalid("content is not valid Base64")
            sha = store.blob(raw)
            return {"url": f"{self._api(full_name)}/git/blobs/{sha}", "sha": sha}, 201

        @app.get("/repos/<owner>/<name>/git/blobs/<sha>")
        def get_blob(owner: str, name: str, sha: str) -> Any:
            found = repo_of(owner, name)
            if found is None or found[1].kind(sha) != "blob":
                return not_found
            full_name, store = found
            raw = store.objects[sha]["data"]
            return {
                "content": base64.b64encode(raw).decode(),
                "encoding": "base64",
                "url": f"{self._api(full_name)}/git/blobs/{sha}",
                "sha": sha,
                "size": len(raw),
                "node_id": "B_" + sha[:12],
            }

        @app.get("/repos/<owner>/<name>/git/trees/<sha>")
        def get_tree(owner: str, name: str, sha: str) -> Any:
            found = repo_of(owner, name)
            if found is None:
                return not_found
            full_name, store = found
            if store.kind(sha) == "commit":
                sha = store.objects[sha]["tree"]
            if store.kind(sha) != "tree":
                return not_found
            return self._tree_json(
                full_name, sha, request.args.get("recursive") not in (None, "", "0", "false")
            )

        @app.post("/repos/<owner>/<name>/git/trees")
        def create_tree(owner: str, name: str) -> Any:
            found = repo_of(owner, name)
            if found is None:
                return not_found
            full_name, store = found
            data = request.get_json(silent=True) or {}
            base = data.get("base_tree")
            if base is not None and store.kind(base) != "tree":
                return invalid("base_tree is not a valid tree oid")
            flat = store.flatten(base) if base else {}
            for element in data.get("tree") or []:
                path, mode = element.get("path"), element.get("mode")
                if not isinstance(path, str) or not path or mode not in MODES:
                    return invalid(
                        "Invalid tree info", resource="Tree", field="tree", code="invalid"
                    )
                if ("sha" in element) == ("content" in element):
                    # As GitHub answers both a missing and a doubled one.
                    return invalid(
                        "Must supply either tree.sha or tree.content. "
                        "Request will be rejected if both are present."
                    )
                path = path.strip("/")
                present = [p for p in flat if p == path or p.startswith(path + "/")]
                if "sha" in element and element["sha"] is None and not present:
                    # GitHub refuses to delete what the base tree does not hold.
                    return invalid("GitRPC::BadObjectState")
                for existing in present:
                    del flat[existing]
                if "content" in element:
                    flat[path] = (mode, store.blob(str(element["content"]).encode()))
                elif element["sha"] is None:
                    continue  # a null sha deletes the path
                elif mode == "040000":
                    if store.kind(element["sha"]) != "tree":
                        return invalid("Tree SHA does not exist")
                    flat.update(
                        {f"{path}/{p}": e for p, e in store.flatten(element["sha"]).items()}
                    )
                else:
                    if store.kind(element["sha"]) != MODES[mode]:
                        return invalid(f"Object {element['sha']} does not exist")
                    flat[path] = (mode, element["sha"])
            sha = store.build(flat)
            return self._tree_json(full_name, sha, False), 201

        @app.get("/repos/<owner>/<name>/git/commits/<sha>")
        def get_commit(owner: str, name: str, sha: str) -> Any:
            found = repo_of(owner, name)
            if found is None or found[1].kind(sha) != "commit":
                return not_found
            return self._commit_json(found[0], sha)

        @app.post("/repos/<owner>/<name>/git/commits")
        def create_commit(owner: str, name: str) -> Any:
            found = repo_of(owner, name)
            if found is None:
                return not_found
            full_name, store = found
            data = request.get_json(silent=True) or {}
            if not isinstance(data.get("message"), str):
                return invalid('Invalid request.\n\n"message" wasn\'t supplied.')
            if store.kind(data.get("tree") or "") != "tree":
                return invalid("Tree SHA does not exist")
            parents = data.get("parents") or []
            if any(store.kind(p) != "commit" for p in parents):
                return invalid("Parent SHA does not exist or is not a commit object")
            author = self._author(data.get("author"))
            sha = store.commit(data["tree"], parents, data["message"], author)
            return self._commit_json(full_name, sha), 201

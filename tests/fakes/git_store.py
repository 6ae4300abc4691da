"""The fake GitHub's in-memory git objects and refs, hashed the way git hashes them."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime
from typing import Any

# Modes GitHub accepts in a tree entry, and the object type each one names.
MODES = {
    "100644": "blob",
    "100755": "blob",
    "120000": "blob",
    "040000": "tree",
    "160000": "commit",
}


def now() -> str:
    """Now, as GitHub writes times."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _hash(kind: str, body: bytes) -> str:
    """Git's object id: sha1 of ``<kind> <size>\\0<body>``, so shas match what git computes."""
    return hashlib.sha1(f"{kind} {len(body)}\0".encode() + body).hexdigest()


def invalid(message: str, status: int = 422, /, **error: Any) -> tuple[dict[str, Any], int]:
    """GitHub's error body; with ``error`` fields, its "Validation Failed" shape."""
    docs = "https://docs.github.com/rest"
    if error:
        return {
            "message": "Validation Failed",
            "errors": [error],
            "documentation_url": docs,
        }, status
    return {"message": message, "documentation_url": docs}, status


class GitStore:
    """One repository's objects and refs, hashed the way git hashes them."""

    def __init__(self) -> None:
        self.objects: dict[str, dict[str, Any]] = {}
        self.refs: dict[str, str] = {}  # "refs/heads/main" -> commit sha

    def blob(self, data: bytes) -> str:
        """Store a blob; returns its sha."""
        sha = _hash("blob", data)
        self.objects[sha] = {"type": "blob", "data": data}
        return sha

    def tree(self, entries: dict[str, tuple[str, str]]) -> str:
        """Store a tree of ``name -> (mode, sha)`` (one level); returns its sha."""

        def order(name: str) -> str:
            # Git sorts a subtree as if its name ended with "/".
            return name + "/" if entries[name][0] == "040000" else name

        body = b"".join(
            f"{entries[name][0].lstrip('0')} {name}\0".encode() + bytes.fromhex(entries[name][1])
            for name in sorted(entries, key=order)
        )
        sha = _hash("tree", body)
        self.objects[sha] = {"type": "tree", "entries": dict(entries)}
        return sha

    def build(self, flat: dict[str, tuple[str, str]]) -> str:
        """Store nested trees for ``path -> (mode, sha)``; returns the root tree's sha."""
        level: dict[str, tuple[str, str]] = {}
        children: dict[str, dict[str, tuple[str, str]]] = {}
        for path, entry in flat.items():
            head, sep, rest = path.partition("/")
            if sep:
                children.setdefault(head, {})[rest] = entry
            else:
                level[head] = entry
        for name, sub in children.items():
            level[name] = ("040000", self.build(sub))
        return self.tree(level)

    def flatten(self, tree_sha: str, prefix: str = "") -> dict[str, tuple[str, str]]:
        """Every non-tree entry under a tree, by full path."""
        flat: dict[str, tuple[str, str]] = {}
        for name, (mode, sha) in self.objects[tree_sha]["entries"].items():
            if mode == "040000":
                flat.update(self.flatten(sha, f"{prefix}{name}/"))
            else:
                flat[prefix + name] = (mode, sha)
        return flat

    def commit(self, tree: str, parents: list[str], message: str, author: dict[str, str]) -> str:
        """Store a commit; returns its sha."""
        stamp = int(datetime.fromisoformat(author["date"].replace("Z", "+00:00")).timestamp())
        who = f"{author['name']} <{author['email']}> {stamp} +0000"
        lines = [f"tree {tree}", *(f"parent {p}" for p in parents)]
        body = "\n".join([*lines, f"author {who}", f"committer {who}", "", message]).encode()
        sha = _hash("commit", body)
        self.objects[sha] = {
            "type": "commit",
            "tree": tree,
            "parents": list(parents),
            "message": message,
            "author": dict(author),
            "committer": dict(author),
        }
        return sha

    def kind(self, sha: str) -> str | None:
        """The type of the object ``sha`` names, or None."""
        found = self.objects.get(sha)
        return found["type"] if found else None

    def resolve(self, ref: str) -> str | None:
        """A branch name, ``refs/...`` or a commit sha, as a commit sha."""
        for candidate in (ref, f"refs/heads/{ref}", f"refs/tags/{ref}"):
            if candidate in self.refs:
                return self.refs[candidate]
        return ref if self.kind(ref) == "commit" else None

    def lookup(self, commit_sha: str, path: str) -> tuple[str, str] | None:
        """``(mode, sha)`` of ``path`` in a commit ("" is the root tree), or None."""
        mode, sha = "040000", self.objects[commit_sha]["tree"]
        for part in [p for p in path.split("/") if p]:
            if mode != "040000":
                return None
            entry = self.objects[sha]["entries"].get(part)
            if entry is None:
                return None
            mode, sha = entry
        return mode, sha

    def ancestors(self, commit_sha: str) -> set[str]:
        """The commit and every commit it descends from."""
        seen: set[str] = set()
        todo = [commit_sha]
        while todo:
            sha = todo.pop()
            if sha not in seen:
                seen.add(sha)
                todo.extend(self.objects[sha]["parents"])
        return seen

"""The anchors a captured lesson gets from the pull request it came from: its changed files.

The rule (`from_changes`), on the PR's files less the removed ones and those no lesson is about
(`incidental`):

- at most `FEW_FILES` files: the files themselves (``orders/locking.py``);
- else, when they fall into at most `FEW_GROUPS` top-level groups: one glob per group, the
  group's longest common directory (``orders/**``, or ``orders/api/**`` when all of them are
  there), and a file at the repository's root as itself (``pyproject.toml``);
- else nothing: a PR touching everything is about no file in particular.

Every glob passes `fields.check_path` (one that does not is dropped, never an error: the path is
GitHub's, not a person's), so a lesson is never refused for its derived anchors.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import PurePosixPath

from playbook.anchors.fields import MAX_PATHS, check_path
from playbook.anchors.stale import REMOVED, FileChange
from playbook.lessons.fields import FieldProblem

FEW_FILES = 3
FEW_GROUPS = 3
# Files a change touches along the way, whatever it is about: dependency lock files and
# changelogs. Matched on the file's name, without case.
LOCK_FILES = frozenset(
    {
        "package-lock.json",
        "npm-shrinkwrap.json",
        "yarn.lock",
        "pnpm-lock.yaml",
        "bun.lockb",
        "poetry.lock",
        "pipfile.lock",
        "uv.lock",
        "pdm.lock",
        "cargo.lock",
        "gemfile.lock",
        "composer.lock",
        "go.sum",
        "mix.lock",
        "podfile.lock",
        "packages.lock.json",
    }
)
_CHANGELOGS = ("changelog", "changes", "history", "news")
# A PR lists at most 3,000 files; no more are read.
MAX_FILES = 3_000


def incidental(path: str) -> bool:
    """Whether a changed file is one no lesson is about: a lock file or a changelog."""
    name = PurePosixPath(path).name.lower()
    if name in LOCK_FILES or name.endswith(".lock"):
        return True
    stem = name.split(".", 1)[0]
    return stem in _CHANGELOGS and name != stem + ".py"  # `changes.py` is code


def _checked(path: str) -> str | None:
    try:
        return check_path(path) or None
    except FieldProblem:
        return None


def _common(dirs: Sequence[tuple[str, ...]]) -> tuple[str, ...]:
    """The longest leading run of segments every directory shares."""
    first = dirs[0]
    size = len(first)
    for other in dirs[1:]:
        size = min(size, len(other))
        for index in range(size):
            if other[index] != first[index]:
                size = index
                break
    return first[:size]


def from_changes(changes: Sequence[FileChange]) -> list[str] | None:
    """The globs a lesson captured from a PR changing ``changes`` is anchored to; None if none.

    Renamed files count by their new path; see the module for the rule.
    """
    files: dict[str, None] = {}
    for change in changes[:MAX_FILES]:
        if change.status == REMOVED or incidental(change.path):
            continue
        path = _checked(change.path)
        if path is not None:
            files.setdefault(path, None)
    if not files:
        return None
    if len(files) <= FEW_FILES:
        return list(files)
    groups: dict[str, list[tuple[str, ...]]] = {}
    for path in files:
        parts = tuple(path.split("/"))
        groups.setdefault(parts[0], []).append(parts[:-1])
        if len(groups) > FEW_GROUPS:
            return None  # all over the repository: about no file in particular
    globs = []
    for first, dirs in groups.items():
        common = _common(dirs)
        # A top-level file is its own group (a directory of that name has its files under it).
        globs.append(f"{'/'.join(common)}/**" if common else first)
    return globs[:MAX_PATHS]

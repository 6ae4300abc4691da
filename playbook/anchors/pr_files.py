"""Which anchored lessons a pull request's changed files touch: the globs, matched segment-wise.

The rule, for a repository-relative ``/``-separated path and a lesson's glob:

- ``**`` as a whole segment is any number of segments, none included (``orders/**``,
  ``**/locking.py``); inside a segment, ``*``, ``?`` and ``[seq]`` are `fnmatch`'s and never
  cross a ``/`` (``orders/*.py`` is the directory's own files, not its subdirectories').
- A glob without a wildcard names a file or a directory: ``orders/locking.py`` is that file,
  ``orders`` (or ``orders/``) is everything under ``orders/`` too.
- A glob that is only ``**`` segments matches every file: it anchors nothing and is ignored,
  or one careless lesson would be listed on every pull request.

Matching is case-sensitive, as git's paths are. Both inputs are bounded before they are read.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase

# GitHub lists at most 3,000 files of a pull request ("List pull requests files").
MAX_FILES = 3_000
# Past these, a path or a glob is nobody's real file: skipped, never read.
MAX_PATH_CHARS = 1_024
MAX_GLOB_CHARS = 300
MAX_SEGMENTS = 64
_WILDCARDS = frozenset("*?[")


@dataclass(frozen=True)
class ChangedFile:
    """A file a pull request changes, and its old path when the change renames it."""

    path: str
    previous: str | None = None

    def paths(self) -> tuple[str, ...]:
        """Its paths: a lesson anchored to a renamed file's old path is about this change too."""
        return (self.path,) if not self.previous else (self.path, self.previous)


@dataclass(frozen=True)
class Anchored:
    """A lesson some changed files match: its id and those files, in the PR's order."""

    bullet_id: str
    files: tuple[str, ...]


def _segments(text: str) -> list[str] | None:
    parts = [part for part in text.strip().strip("/").split("/") if part not in ("", ".")]
    return parts if 0 < len(parts) <= MAX_SEGMENTS else None


def catch_all(glob: str) -> bool:
    """Whether ``glob`` matches every path (only ``**`` segments): it anchors nothing."""
    parts = _segments(glob)
    return parts is None or all(part == "**" for part in parts)


def matches(glob: str, path: str) -> bool:
    """Whether repository-relative ``path`` falls under ``glob`` (the module's rule)."""
    if len(glob) > MAX_GLOB_CHARS or len(path) > MAX_PATH_CHARS or catch_all(glob):
        return False
    pattern, names = _segments(glob), _segments(path)
    if pattern is None or names is None:
        return False
    if not any(c in _WILDCARDS for c in glob):
        # A plain name: that file, or the directory and everything under it.
        return names[: len(pattern)] == pattern
    return _match(pattern, names)


def _match(pattern: Sequence[str], names: Sequence[str]) -> bool:
    """Segment-wise glob match by dynamic programming: at most len(pattern) * len(names) steps
    (a recursive matcher backtracks exponentially on many ``**``)."""
    # reach[j]: the pattern's first i segments match the path's first j segments.
    reach = [True] + [False] * len(names)
    for part in pattern:
        if part == "**":
            # Zero or more segments: once a prefix is reached, every longer one is.
            seen = False
            reach = [seen := seen or r for r in reach]
        else:
            reach = [False] + [reach[j] and fnmatchcase(names[j], part) for j in range(len(names))]
        if not any(reach):
            return False
    return reach[-1]


def anchored(
    lessons: Iterable[tuple[str, Sequence[str] | None]], changed: Sequence[ChangedFile]
) -> list[Anchored]:
    """The lessons (id, globs) whose globs match a changed file, each with the files matched.

    Only the first `MAX_FILES` changed files are read (GitHub lists no more), and a lesson's
    globs are read only when they are a list of strings.
    """
    files = changed[:MAX_FILES]
    found: list[Anchored] = []
    for bullet_id, globs in lessons:
        if not isinstance(globs, list | tuple):
            continue
        usable = [g for g in globs if isinstance(g, str) and not catch_all(g)]
        hit = [
            changed_file.path
            for changed_file in files
            if any(matches(g, p) for g in usable for p in changed_file.paths())
        ]
        if hit:
            found.append(Anchored(bullet_id, tuple(dict.fromkeys(hit))))
    return found

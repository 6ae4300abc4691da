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


@dataclass(frozen=True)
class _Glob:
    """A glob read once: its segments, whether it is a plain name, and its literal head."""

    pattern: tuple[str, ...]
    plain: bool
    head: int  # how many leading segments hold no wildcard: compared as strings, first


def _compiled(glob: object) -> _Glob | None:
    """A glob ready to match; None when it anchors nothing (or is no string)."""
    if not isinstance(glob, str) or len(glob) > MAX_GLOB_CHARS or catch_all(glob):
        return None
    pattern = _segments(glob)
    if pattern is None:
        return None
    head = next((i for i, part in enumerate(pattern) if _WILDCARDS & set(part)), len(pattern))
    return _Glob(tuple(pattern), head == len(pattern), head)


def _path(path: str) -> tuple[str, ...] | None:
    parts = _segments(path) if len(path) <= MAX_PATH_CHARS else None
    return tuple(parts) if parts is not None else None


def _fits(glob: _Glob, names: tuple[str, ...]) -> bool:
    head = glob.pattern[: glob.head]
    if names[: glob.head] != head:
        return False  # most paths part here, before any wildcard is read
    if glob.plain:
        return True  # a plain name: that file, or the directory and everything under it
    rest, tail = glob.pattern[glob.head :], names[glob.head :]
    if rest == ("**",):
        return True
    last = rest[-1]
    if last != "**" and not (tail and fnmatchcase(tail[-1], last)):
        return False  # the last segment must match the file's name: most paths part here
    return _match(rest, tail)


def matches(glob: str, path: str) -> bool:
    """Whether repository-relative ``path`` falls under ``glob`` (the module's rule)."""
    compiled, names = _compiled(glob), _path(path)
    return compiled is not None and names is not None and _fits(compiled, names)


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
    # Each path split and each glob read once (3,000 files times the anchored lessons), and a
    # glob starting with a plain name reads only the paths starting with it.
    files: list[tuple[str, tuple[str, ...]]] = []  # (the file's path, one of its paths split)
    for changed_file in changed[:MAX_FILES]:
        for split in map(_path, changed_file.paths()):
            if split is not None:
                files.append((changed_file.path, split))
    by_first: dict[str, list[int]] = {}
    for index, (_, split) in enumerate(files):
        by_first.setdefault(split[0], []).append(index)
    everything = range(len(files))
    found: list[Anchored] = []
    for bullet_id, globs in lessons:
        if not isinstance(globs, list | tuple):
            continue
        hit: set[int] = set()
        for glob in filter(None, map(_compiled, globs)):
            candidates = by_first.get(glob.pattern[0], []) if glob.head else everything
            hit.update(i for i in candidates if i not in hit and _fits(glob, files[i][1]))
        if hit:
            paths = dict.fromkeys(files[i][0] for i in sorted(hit))
            found.append(Anchored(bullet_id, tuple(paths)))
    return found

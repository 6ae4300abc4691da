"""The one rule for whether a repository path falls under a lesson's anchor glob.

Staleness (`stale`), the PR comment (`pr_files`) and retrieval (`matching`) all read a
lesson's ``paths`` by this rule, for a repository-relative, ``/``-separated path:

- Segment-wise and case-sensitive, as git's paths are: a segment is the text between two
  ``/``; a leading ``./`` or ``/``, empty and ``.`` segments are ignored.
- ``**`` as a whole segment is any number of segments, none included: ``**/locking.py`` is
  ``locking.py`` at any depth, ``a/**/b.py`` is ``a/b.py`` too. Elsewhere (``orders**``) it
  is two ``*``.
- Inside a segment, ``*``, ``?`` and ``[seq]`` (``[!seq]``) are `fnmatch`'s and never cross a
  ``/``: ``orders/*.py`` is the directory's own files, not its subdirectories'.
- A glob without a wildcard names a file or a directory: ``orders/locking.py`` is that file,
  ``orders`` is that file or everything under ``orders/``.
- ``dir/`` or ``dir/**`` is what is under the directory, not ``dir`` itself: a glob ending
  in ``**`` takes one segment at least there.
- A glob that is only ``**`` segments (``**``, ``**/``) matches every path: it anchors
  nothing, or one careless lesson would be about every change.

Both inputs are bounded before they are read (a longer path or glob matches nothing), and
a match is dynamic programming over the segments: at most (glob segments x path segments)
steps, however many ``**`` a hostile glob holds (a backtracking matcher is exponential).
`Index` keeps the fast path for many paths (a PR's 3,000 files against every anchored
lesson): a glob starting with a plain name reads only the paths starting with it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase

# Git allows longer paths in principle; nobody's real file is past these.
MAX_PATH_CHARS = 4_096
MAX_PATH_SEGMENTS = 256
# A lesson's glob is at most 200 characters (`fields.PATH_CHARS`); past these it is no glob.
MAX_GLOB_CHARS = 300
MAX_GLOB_SEGMENTS = 64
_WILDCARDS = frozenset("*?[")
ANY = "**"

Split = tuple[str, ...]


def _segments(text: str) -> list[str]:
    return [part for part in text.strip().split("/") if part not in ("", ".")]


def split_path(path: object) -> Split | None:
    """A path as its segments; None when it is no string, empty or past the bounds."""
    if not isinstance(path, str) or len(path) > MAX_PATH_CHARS:
        return None
    parts = _segments(path)
    return tuple(parts) if 0 < len(parts) <= MAX_PATH_SEGMENTS else None


def is_wild(segment: str) -> bool:
    """Whether a glob's segment holds a wildcard (``*``, ``?`` or ``[``)."""
    return bool(_WILDCARDS & set(segment))


@dataclass(frozen=True)
class Glob:
    """A glob read once: its segments, whether it is a plain name, and its literal head."""

    text: str
    pattern: Split
    plain: bool  # no wildcard, no trailing `/`: a file or a directory
    head: int  # how many leading segments hold no wildcard: compared as strings, first

    def literal_tail(self, count: int) -> Split | None:
        """The glob's last ``count`` segments when none holds a wildcard, else None."""
        if count > len(self.pattern):
            return None
        tail = self.pattern[len(self.pattern) - count :]
        return None if any(is_wild(part) for part in tail) else tail


def compile_glob(glob: object) -> Glob | None:
    """A glob ready to match; None when it anchors nothing (only `**`), or is no glob."""
    if not isinstance(glob, str) or len(glob) > MAX_GLOB_CHARS:
        return None
    parts = _segments(glob)
    if not parts or len(parts) > MAX_GLOB_SEGMENTS or all(part == ANY for part in parts):
        return None
    under = glob.rstrip().endswith("/") or parts[-1] == ANY
    if under:
        # What is under the directory: one segment at least (`orders/**` is not `orders`).
        parts = [*parts[:-1], "*", ANY] if parts[-1] == ANY else [*parts, "*", ANY]
    head = next((i for i, part in enumerate(parts) if is_wild(part)), len(parts))
    return Glob(glob, tuple(parts), head == len(parts), head)


def anchors_nothing(glob: object) -> bool:
    """Whether ``glob`` anchors no path: only ``**`` segments, empty, or past the bounds."""
    return compile_glob(glob) is None


def is_plain(glob: str) -> bool:
    """Whether ``glob`` names one file or directory as written (no wildcard, no ``/`` end)."""
    compiled = compile_glob(glob)
    return compiled is not None and compiled.plain


def fits(glob: Glob, names: Split) -> bool:
    """Whether the split path ``names`` falls under the compiled ``glob``."""
    if names[: glob.head] != glob.pattern[: glob.head]:
        return False  # most paths part here, before any wildcard is read
    if glob.plain:
        return True  # a plain name: that file, or the directory and everything under it
    rest, tail = glob.pattern[glob.head :], names[glob.head :]
    last = rest[-1]
    if last != ANY and not (tail and fnmatchcase(tail[-1], last)):
        return False  # the last segment must match the file's name: most paths part here
    return _match(rest, tail)


def matches(glob: str, path: str) -> bool:
    """Whether repository-relative ``path`` falls under ``glob`` (the module's rule)."""
    compiled, names = compile_glob(glob), split_path(path)
    return compiled is not None and names is not None and fits(compiled, names)


def matches_any(path: str, globs: Iterable[str]) -> bool:
    """Whether ``path`` falls under one of ``globs``."""
    names = split_path(path)
    if names is None:
        return False
    return any(g is not None and fits(g, names) for g in map(compile_glob, globs))


def _match(pattern: Sequence[str], names: Sequence[str]) -> bool:
    """Segment-wise glob match by dynamic programming: len(pattern) x len(names) steps."""
    # reach[j]: the pattern's segments read so far match the path's first j segments.
    reach = [True] + [False] * len(names)
    for part in pattern:
        if part == ANY:
            # Zero or more segments: once a prefix is reached, every longer one is.
            seen = False
            reach = [seen := seen or r for r in reach]
        else:
            reach = [False] + [reach[j] and fnmatchcase(names[j], part) for j in range(len(names))]
        if not any(reach):
            return False
    return reach[-1]


class Index:
    """Many paths, each split once and filed by its first segment, for many globs to match."""

    def __init__(self, paths: Iterable[str]) -> None:
        self.splits: list[Split | None] = [split_path(path) for path in paths]
        self._by_first: dict[str, list[int]] = {}
        for index, names in enumerate(self.splits):
            if names is not None:
                self._by_first.setdefault(names[0], []).append(index)
        self._all = [i for i, names in enumerate(self.splits) if names is not None]

    def hits(self, glob: Glob) -> list[int]:
        """The positions of the paths ``glob`` matches, in the order they were given."""
        candidates = self._by_first.get(glob.pattern[0], []) if glob.head else self._all
        return [i for i in candidates if fits(glob, self.splits[i])]  # type: ignore[arg-type]

    def matching(self, globs: Iterable[object]) -> set[int]:
        """The positions of the paths one of ``globs`` matches (globs anchoring nothing skipped)."""
        found: set[int] = set()
        for glob in filter(None, map(compile_glob, globs)):
            found.update(self.hits(glob))
        return found

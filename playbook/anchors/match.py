"""Whether a repository path matches a lesson's anchor glob.

The semantics, one path segment (the text between two ``/``) at a time, case-sensitive:

- ``*`` matches any run of characters inside one segment, never a ``/``;
  ``?`` one character of a segment; ``[abc]``, ``[a-z]`` and ``[!abc]`` one character
  of a set (``fnmatch.fnmatchcase`` on the segment).
- ``**`` as a whole segment matches any number of segments, none included:
  ``orders/**`` matches ``orders/a.py`` and ``orders/x/y/a.py``; ``**/test_*.py`` matches
  ``test_a.py`` and ``a/b/test_a.py``; ``a/**/b.py`` matches ``a/b.py``. Elsewhere
  (``orders**``) it is two ``*``.
- A pattern ending in ``/`` names a directory: everything under it (``orders/`` is ``orders/**``).
- Otherwise a pattern matches the whole path: ``orders`` is not ``orders/a.py``, and ``*.py``
  only the files at the repository's root (as Copilot's ``applyTo`` and Cursor's ``globs``
  read it; nothing matches a bare file name at any depth, as ``.gitignore`` would).

Paths and patterns are repository-relative with ``/`` separators; a leading ``./`` or ``/``
is ignored. Matching is linear in the segments (no backtracking over the text), and a
path or pattern longer than ``MAX_CHARS`` matches nothing.
"""

from __future__ import annotations

from fnmatch import fnmatchcase

# GitHub's paths are bounded well below this; longer text is nobody's file.
MAX_CHARS = 4096
_GLOB_CHARS = frozenset("*?[")


def segments(text: str) -> list[str]:
    """A path or pattern as its segments, without a leading ``./`` or ``/`` and empty parts."""
    while text.startswith("./"):
        text = text[2:]
    return [part for part in text.split("/") if part and part != "."]


def is_literal(pattern: str) -> bool:
    """Whether ``pattern`` names one file exactly (no glob character, no trailing ``/``)."""
    return not (_GLOB_CHARS & set(pattern)) and not pattern.endswith("/")


def matches(path: str, pattern: str) -> bool:
    """Whether the repository path ``path`` is one the anchor ``pattern`` is about."""
    if not path or not pattern or len(path) > MAX_CHARS or len(pattern) > MAX_CHARS:
        return False
    parts = segments(pattern)
    if pattern.endswith("/") and parts:
        parts.append("**")
    if parts and parts[-1] == "**":
        # At the end, what is under: one segment at least (``orders/**`` is not ``orders``).
        parts[-1:] = ["*", "**"]
    names = segments(path)
    if not parts or not names:
        return False
    return _match(names, parts)


def matches_any(path: str, patterns: list[str] | tuple[str, ...]) -> bool:
    """Whether ``path`` matches one of ``patterns``."""
    return any(matches(path, pattern) for pattern in patterns)


def _match(names: list[str], parts: list[str]) -> bool:
    # reach[j]: the first j segments of the path are matched by the parts seen so far. One
    # pass per part: O(parts x segments), whatever the number of `**`.
    reach = [True] + [False] * len(names)
    for part in parts:
        if part == "**":
            # Any number of segments: from the first reachable point on, all are reachable.
            seen = False
            for j in range(len(reach)):
                seen = seen or reach[j]
                reach[j] = seen
        else:
            reach = [False] + [reach[j] and fnmatchcase(names[j], part) for j in range(len(names))]
        if not any(reach):
            return False
    return reach[-1]

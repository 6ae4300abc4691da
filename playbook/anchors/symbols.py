"""Which function and class definitions a merged PR's patches remove (and do not add back).

A line of a unified diff defines a name when it reads as one of a small set of declarations:

- a keyword and a name: ``def acquire``, ``async def acquire``, ``class OrderLock``,
  ``function acquire``, ``fn acquire``, ``fun acquire`` (``fun Foo.acquire``), ``func acquire``,
  ``func (l *Lock) acquire``, ``sub acquire``; ``interface``, ``enum``, ``struct``, ``record``,
  ``trait``, ``object`` and Go's ``type Name`` for types;
- a Java/Kotlin/C#-style declaration: words shaped like modifiers and a type, then the name
  and ``(``: ``public synchronized Lock acquire(``, ``Task<int> AcquireAsync(``. A call is
  not one: no ``=`` before the ``(``, and not after ``return``, ``new``, ``if`` and the like.

A name is removed when a ``-`` line of the PR defines it and no ``+`` line of the same PR
(any file) does: a move or a signature change is not a removal. Each line is read up to
`LINE_CHARS` characters, each patch up to `PATCH_CHARS`, with possessive patterns only (no
backtracking). A file GitHub gives no patch for (a binary or an oversized diff) says nothing.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

# GitHub's patch of one file; `bot.pull_files` keeps at most this much of each.
PATCH_CHARS = 64_000
LINE_CHARS = 400
_NAME = r"([A-Za-z_]\w*+)"
_KEYWORD_DEF = re.compile(
    r"(?:^|[\s;{}])(?:def|function\*?|fn|fun|func|sub|class|interface|enum|struct|record|trait"
    r"|object)\s++\*?\s*+(?:<[^<>\n]*+>\s*+)?(?:\w++\.)*+" + _NAME,
    re.ASCII,
)
# Go: `func (l *Lock) acquire(` and `type Lock struct`.
_GO_METHOD = re.compile(r"^\s*+func\s*+\([^()\n]*+\)\s*+" + _NAME, re.ASCII)
_GO_TYPE = re.compile(r"^\s*+type\s++" + _NAME + r"\s", re.ASCII)
_TYPE_WORD = re.compile(r"[\w<>\[\]?,.@]++", re.ASCII)
_IDENTIFIER = re.compile(_NAME, re.ASCII)
# Words that start a statement or an expression, not a declaration: `return acquire(`.
_STATEMENT_WORDS = (
    "return new throw throws raise yield await assert if elif else while for foreach switch "
    "case catch except with not and or in is go defer del delete typeof instanceof sizeof "
    "lambda do print echo using lock when match from import select goto let var val const "
    "super this self"
)
_NOT_DECLARING = frozenset(_STATEMENT_WORDS.split())


def definitions(line: str) -> set[str]:
    """The names one line of code declares (a function, method, class or type), if any."""
    code = line[:LINE_CHARS]
    names = {m.group(1) for m in _KEYWORD_DEF.finditer(code)}
    for pattern in (_GO_METHOD, _GO_TYPE):
        found = pattern.match(code)
        if found:
            names.add(found.group(1))
    method = _declared_method(code)
    if method:
        names.add(method)
    return names - _NOT_DECLARING


def _declared_method(code: str) -> str | None:
    """The name of a Java/Kotlin/C#-style declaration (``public Lock acquire(``), or None."""
    head, paren, _ = code.partition("(")
    if not paren or "=" in head:
        return None  # no call, no assignment: `x = make(`
    words = head.split()
    if len(words) < 2 or words[0] in _NOT_DECLARING:
        return None
    name = _IDENTIFIER.match(words[-1])
    if name is None or name.group(0) != words[-1].partition("<")[0]:
        return None
    if not all(_TYPE_WORD.fullmatch(word) for word in words[:-1]):
        return None
    return name.group(0)


def changed_definitions(patch: str) -> tuple[set[str], set[str]]:
    """The names ``-`` lines of ``patch`` define, and those its ``+`` lines define."""
    removed: set[str] = set()
    added: set[str] = set()
    for line in patch[:PATCH_CHARS].splitlines():
        if line.startswith("-"):
            removed |= definitions(line[1:])
        elif line.startswith("+"):
            added |= definitions(line[1:])
    return removed, added


def removed(patches: Iterable[tuple[str, str | None]]) -> dict[str, list[str]]:
    """Name -> the files (in the PR's order) whose patch removes its definition, for the
    names no ``+`` line of the PR defines again. ``patches``: (path, patch or None)."""
    gone: dict[str, list[str]] = {}
    again: set[str] = set()
    for path, patch in patches:
        if not patch:
            continue
        minus, plus = changed_definitions(patch)
        again |= plus
        for name in minus:
            gone.setdefault(name, []).append(path)
    return {name: files for name, files in gone.items() if name not in again}


def keys(symbol: str) -> tuple[str, ...]:
    """The names a lesson's symbol is removed by: its last part, then its class (the part
    before): ``OrderLock.acquire`` is gone with ``acquire`` or with ``OrderLock``."""
    parts = [part for part in symbol.split(".") if part]
    return tuple(dict.fromkeys(reversed(parts[-2:])))

"""The paths and symbols a ticket names, and which anchors they match (pure: no database)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase

# What of a ticket is read for names: its summary and the start of its description, where a
# stack trace or "in orders/locking.py" usually is.
DESCRIPTION_CHARS = 2_000
# The most names kept from one ticket: a pasted log names hundreds of frames, the first
# ones (the error's own) matter.
MAX_NAMED = 200
_NAME_CHARS = 300
# Runs of the characters of a path or a dotted name, possessive: no backtracking, one pass.
_RUN = re.compile(r"[\w./-]++")
_SYMBOL = re.compile(r"[A-Za-z_]\w*+(?:\.[A-Za-z_]\w*+)*+", re.ASCII)
# A file named without a directory is a path when it ends in a source or config extension:
# `OrderLock.java` is a file, `OrderLock.acquire` a method.
_EXTENSIONS = frozenset(
    [
        "py",
        "pyi",
        "ts",
        "tsx",
        "js",
        "jsx",
        "mjs",
        "cjs",
        "java",
        "kt",
        "kts",
        "go",
        "rs",
        "rb",
        "php",
        "cs",
        "c",
        "h",
        "cc",
        "cpp",
        "hpp",
        "m",
        "swift",
        "scala",
        "sql",
        "yml",
        "yaml",
        "json",
        "toml",
        "ini",
        "cfg",
        "md",
        "rst",
        "html",
        "css",
        "scss",
        "vue",
        "svelte",
        "sh",
        "xml",
        "gradle",
        "properties",
        "tf",
        "proto",
        "ex",
        "exs",
        "erl",
        "clj",
        "dart",
        "lua",
        "pl",
        "r",
        "jl",
    ]
)


@dataclass(frozen=True)
class Named:
    """The repository paths and code symbols a ticket (or a search's ``paths``) names."""

    paths: tuple[str, ...] = ()
    symbols: frozenset[str] = frozenset()

    def __bool__(self) -> bool:
        return bool(self.paths or self.symbols)


def _is_path(run: str) -> bool:
    if "/" in run:
        return any(part not in ("", ".", "..") for part in run.split("/"))
    stem, dot, ext = run.rpartition(".")
    return bool(dot and stem and ext.lower() in _EXTENSIONS)


def named_in(text: str, extra_paths: Iterable[str] = ()) -> Named:
    """The paths and symbols ``text`` names (a ticket's summary and description), bounded.

    Backslashes read as slashes (a Windows stack trace); ``extra_paths`` are paths given
    outright (a search's ``paths``).
    """
    paths: dict[str, None] = {}
    for given in extra_paths:
        cleaned = given.strip().replace("\\", "/").strip("/")
        if cleaned and len(paths) < MAX_NAMED:
            paths.setdefault(cleaned[:_NAME_CHARS], None)
    symbols: set[str] = set()
    for match in _RUN.finditer(text.replace("\\", "/")):
        if len(paths) + len(symbols) >= MAX_NAMED:
            break
        run = match.group(0).strip("./-")[:_NAME_CHARS]
        if not run:
            continue
        if _is_path(run):
            paths.setdefault(run.removeprefix("./"), None)
        elif _SYMBOL.fullmatch(run):
            symbols.update(_dotted_suffixes(run))
    return Named(tuple(paths), frozenset(symbols))


def ticket_text(summary: str, description: str | None) -> str:
    """What of a ticket `named_in` reads: the summary and the description's first part."""
    return f"{summary}\n{(description or '')[:DESCRIPTION_CHARS]}"


def _dotted_suffixes(name: str) -> list[str]:
    # `com.shop.OrderLock.acquire` names `OrderLock.acquire` and `acquire` too.
    parts = name.split(".")
    return [".".join(parts[i:]) for i in range(len(parts))]


def _suffixes(path: str) -> list[str]:
    # A stack trace names `src/orders/locking.py` where the anchor says `orders/locking.py`.
    parts = [part for part in path.split("/") if part]
    return ["/".join(parts[i:]) for i in range(len(parts))]


def match(named: Named, paths: Sequence[str] | None, symbols: Sequence[str] | None) -> str | None:
    """What of a lesson's anchors the ticket names, in words; or None.

    The glob when the ticket names it as written (``orders/locking.py``), else the glob and
    the path it took (``orders/** (src/orders/a.py)``), or the symbol named.

    A glob matches a named path or any of its trailing parts (fnmatch: `*` crosses `/`, so
    `orders/**` and `orders/*` both take the whole directory); a symbol matches when the
    ticket names it, alone or as the end of a dotted name.
    """
    for glob in paths or ():
        for path in named.paths:
            tails = _suffixes(path)
            if glob in tails:
                return glob
            if any(fnmatchcase(tail, glob) for tail in tails):
                return f"{glob} ({path})"
    for symbol in symbols or ():
        if symbol in named.symbols:
            return symbol
    return None

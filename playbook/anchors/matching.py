"""The paths and symbols a ticket names, and which anchors they match (pure: no database)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cached_property

from playbook.anchors import globs

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
# A Java class by its full name: lower-case package names (at least two, so that
# `self.Client` or `os.Path` is no class file), then the class.
_PACKAGE = re.compile(r"[a-z][a-z0-9_]*+", re.ASCII)
_PACKAGE_PARTS = 2
_CLASS_PARTS = 32
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

    @cached_property
    def _read(self) -> _Read:
        # Read once per ticket, then matched against every anchored lesson's globs.
        return _Read(self.paths)


class _Read:
    """The named paths split once: every trailing part of each in an index, and each whole."""

    def __init__(self, paths: Sequence[str]) -> None:
        splits = [(path, globs.split_path(path)) for path in paths]
        self.owners: list[str] = []
        tails: list[str] = []
        self.whole: dict[tuple[str, ...], str] = {}
        for path, names in splits:
            if names is None:
                continue
            self.whole.setdefault(names, path)
            for start in range(len(names)):
                self.owners.append(path)
                tails.append("/".join(names[start:]))
        self.tails = globs.Index(tails)
        self.longest = max((len(names) for names in self.whole), default=0)

    def under(self, glob: globs.Glob) -> tuple[str, bool] | None:
        """The first named path ``glob`` matches (or one of its trailing parts), and whether
        that part is the glob as written."""
        hits = self.tails.hits(glob)
        if not hits:
            return None
        exact = glob.plain and any(self.tails.splits[i] == glob.pattern for i in hits)
        return self.owners[min(hits)], exact

    def ending(self, glob: globs.Glob) -> str | None:
        """The longest named path the glob ends with, segment for segment, no wildcard read."""
        found = None
        for count in range(1, min(self.longest, len(glob.pattern)) + 1):
            tail = glob.literal_tail(count)
            if tail is None:
                break  # a wildcard: every longer tail holds it too
            found = self.whole.get(tail, found)
        return found


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
            source = _class_file(run)
            if source is not None:
                paths.setdefault(source, None)
    return Named(tuple(paths), frozenset(symbols))


def ticket_text(summary: str, description: str | None) -> str:
    """What of a ticket `named_in` reads: the summary and the description's first part."""
    return f"{summary}\n{(description or '')[:DESCRIPTION_CHARS]}"


def _class_file(name: str) -> str | None:
    """The source file a Java class's full name implies, or None when it names no class.

    ``org.apache.zookeeper.ClientCnxn`` (or a method of it: ``...ClientCnxn.run``) is
    ``org/apache/zookeeper/ClientCnxn.java``: two lower-case package names at least, then
    the first capitalised part (nested classes live in their outer class's file).
    """
    parts = name.split(".", _CLASS_PARTS)[:_CLASS_PARTS]
    for i, part in enumerate(parts):
        if part[:1].isupper():
            return "/".join(parts[: i + 1]) + ".java" if i >= _PACKAGE_PARTS else None
        if not _PACKAGE.fullmatch(part):
            return None
    return None


def _dotted_suffixes(name: str) -> list[str]:
    # `com.shop.OrderLock.acquire` names `OrderLock.acquire` and `acquire` too.
    parts = name.split(".")
    return [".".join(parts[i:]) for i in range(len(parts))]


def match(named: Named, paths: Sequence[str] | None, symbols: Sequence[str] | None) -> str | None:
    """What of a lesson's anchors the ticket names, in words; or None.

    The glob when the ticket names it as written (``orders/locking.py``), else the glob and
    the path it took (``orders/** (src/orders/a.py)``), or the symbol named.

    A glob matches by the one rule (`globs`), with retrieval's leniency on top, because a
    ticket's paths are not repository-relative as an anchor's are:

    1. A glob matches a named path or one of its trailing parts: a stack trace names
       ``src/main/java/org/x/Foo.java`` where the anchor is ``org/x/Foo.java``.
    2. A named path that is how the glob ends (its last segments, without a wildcard)
       matches: a Java stack trace names only ``ClientCnxn.java`` (or the class
       ``org.apache.zookeeper.ClientCnxn``, read as ``org/apache/zookeeper/ClientCnxn.java``)
       where the anchor is ``zookeeper-server/src/main/java/org/apache/zookeeper/ClientCnxn.java``.

    A symbol matches when the ticket names it, alone or as the end of a dotted name.
    """
    if named.paths:
        read = named._read
        for glob in filter(None, map(globs.compile_glob, paths or ())):
            under = read.under(glob)
            if under is not None:
                path, exact = under
                return glob.text if exact else f"{glob.text} ({path})"
            ended = read.ending(glob)
            if ended is not None:
                return f"{glob.text} ({ended})"
    for symbol in symbols or ():
        if symbol in named.symbols:
            return symbol
    return None

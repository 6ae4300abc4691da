"""A lesson's anchors checked and normalised: repository-relative globs and code symbols."""

from __future__ import annotations

import re

from playbook.lessons.fields import FieldProblem, describe

MAX_PATHS = 10
PATH_CHARS = 200
# The files a search may name outright (`paths`): those an agent is about to edit.
MAX_SEARCH_PATHS = 50
MAX_SYMBOLS = 10
SYMBOL_CHARS = 100
# A function, class or method name as code spells it: `acquire`, `OrderLock.acquire`.
_SYMBOL = re.compile(r"[A-Za-z_][\w.]*+", re.ASCII)
# `C:` or `c:/...`: a Windows drive, absolute whatever follows.
_DRIVE = re.compile(r"[A-Za-z]:")


def _items(value: object, field: str) -> list[str]:
    """The items of a list or of comma-separated text; FieldProblem for anything else."""
    if isinstance(value, str):
        return value.split(",")
    if isinstance(value, list | tuple):
        for item in value:
            if not isinstance(item, str):
                raise FieldProblem(field, f"each item must be text, not {describe(item)}")
        return list(value)
    raise FieldProblem(field, f"must be a list or comma-separated text, not {describe(value)}")


def check_path(value: str, field: str = "paths") -> str:
    """One repository-relative glob, normalised (`./a//b` is `a/b`; `.` is ""); FieldProblem
    if unsafe."""
    raw = value.strip()
    if len(raw) > PATH_CHARS:
        raise FieldProblem(field, f"{raw[:40]!r}... is over {PATH_CHARS} characters")
    if any(ord(c) < 32 or ord(c) == 127 for c in raw):
        raise FieldProblem(field, f"{raw!a} holds a control character")
    if "\\" in raw:
        raise FieldProblem(field, f"{raw!r} holds a backslash; write paths with /")
    if raw.startswith("/") or _DRIVE.match(raw):
        raise FieldProblem(field, f"{raw!r} is absolute; write it relative to the repository")
    parts = [part for part in raw.split("/") if part not in ("", ".")]
    if ".." in parts:
        raise FieldProblem(field, f"{raw!r} has a '..' segment; name a path inside the repository")
    path = "/".join(parts)
    if raw.endswith("/") and path:
        path += "/**"  # `orders/` means the directory's files
    return path  # "" for `.` or `./`: no path, dropped like an empty item


def check_paths(value: object, field: str = "paths", most: int = MAX_PATHS) -> list[str] | None:
    """The globs of a list or comma-separated text, normalised, repeats dropped; None if none.

    ``most``: how many may be given (a lesson's anchors, or a search's MAX_SEARCH_PATHS).
    """
    if value is None:
        return None
    paths: dict[str, None] = {}
    for item in _items(value, field):
        path = check_path(item, field) if item.strip() else ""
        if path:
            paths.setdefault(path, None)
    if len(paths) > most:
        raise FieldProblem(field, f"has {len(paths)} paths, over the {most} allowed")
    return list(paths) or None


def check_symbols(value: object, field: str = "symbols") -> list[str] | None:
    """The function or class names of a list or comma-separated text; None if none."""
    if value is None:
        return None
    symbols: dict[str, None] = {}
    for item in _items(value, field):
        name = item.strip()
        if not name:
            continue
        if len(name) > SYMBOL_CHARS:
            raise FieldProblem(field, f"{name[:40]!r}... is over {SYMBOL_CHARS} characters")
        if not _SYMBOL.fullmatch(name):
            raise FieldProblem(
                field, f"{name[:SYMBOL_CHARS]!a} is not a name such as OrderLock.acquire"
            )
        symbols.setdefault(name, None)
    if len(symbols) > MAX_SYMBOLS:
        raise FieldProblem(field, f"has {len(symbols)} symbols, over the {MAX_SYMBOLS} allowed")
    return list(symbols) or None

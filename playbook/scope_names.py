"""Which scope a ticket key is work of, and which scopes a ticket can belong to at all.

Pure string rules with no imports, so settings can check an agent's scope at start without
loading the database layer; ``playbook.scopes`` builds its views on them.
"""

from __future__ import annotations


def scope_of(key: str | None) -> str | None:
    """The scope whose work ``key`` is: ``owner/repo`` of ``owner/repo#N``, ``PROJ`` of
    ``PROJ-123``; None for anything else (empty, ``a/b/c#1``, ``#3``, ``x/y``, ``PROJ``).

    Split at the first ``#`` or ``-``: what follows is the ticket's own and names no scope,
    so a key has one scope whichever scopes exist. ``View.owns`` is the same rule in SQL.
    """
    if not key:
        return None
    if "#" in key:
        repository = key.partition("#")[0]
        return repository if is_repository(repository) else None
    if "/" in key:
        return None  # a path or a repository without an issue number: nobody's ticket
    project, dash, _ = key.partition("-")
    return project if dash and project else None


def is_repository(scope: str) -> bool:
    """True for ``owner/repo``: one slash, a name on each side, no ``#``."""
    owner, slash, name = scope.partition("/")
    return bool(owner and slash and name) and "/" not in name and "#" not in scope


def is_project(scope: str) -> bool:
    """True for a Jira project key as ``scope_of`` can return it: no ``/``, ``#`` or ``-``."""
    return bool(scope) and not any(mark in scope for mark in "/#-")


def problem(scope: str) -> str | None:
    """Why no ticket key can belong to ``scope`` (it would silently match nothing), or None."""
    if is_repository(scope) or is_project(scope):
        return None
    return f"scope {scope!r} is neither owner/repo nor a Jira project key"

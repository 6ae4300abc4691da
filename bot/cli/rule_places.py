"""Where a local rule file sits in its repository: what a nested AGENTS.md's lessons are about."""

from __future__ import annotations

from pathlib import Path

# A checkout is rarely this deep; the walk up looking for its `.git` stops here.
MAX_LEVELS = 64


def _checkout_root(folder: Path) -> Path | None:
    """The nearest folder at or above ``folder`` holding `.git` (a folder, or a worktree's file)."""
    for level, candidate in enumerate((folder, *folder.parents)):
        if level >= MAX_LEVELS:
            return None
        if (candidate / ".git").exists():
            return candidate
    return None


def repo_path(path: Path, folder_given: Path | None) -> str | None:
    """``path``'s place in its repository, ``/``-separated; None when it cannot be known.

    From the git checkout holding it when there is one; else from ``folder_given`` (the
    folder the import was pointed at is taken for the repository); a file named on its own
    outside any checkout has no known place.
    """
    try:
        real = path.absolute()
        root = _checkout_root(real.parent.resolve())
        if root is not None:
            return real.parent.resolve().relative_to(root).joinpath(real.name).as_posix()
        if folder_given is not None:
            return path.relative_to(folder_given).as_posix()
    except (OSError, RuntimeError, ValueError):  # a loop of links; a path outside its root
        return None
    return None

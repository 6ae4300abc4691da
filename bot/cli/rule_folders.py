"""The folders of path-scoped rule files an import reads: Copilot's and Claude Code's.

`.github/instructions/**/NAME.instructions.md` (Copilot's ``applyTo``) and
`.claude/rules/**/*.md` (Claude Code's ``paths``), at any depth below them, as the agents
read them. The bot's own ``playbook-*`` files there are never read (`parse.bots_own`).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bot import local_files
from playbook.rules.parse import CLAUDE_RULES, bots_own, kind_of

if TYPE_CHECKING:
    from github.Repository import Repository

FOLDERS = (".github/instructions", CLAUDE_RULES)
# Folders below a rules folder read at most (each one API call on GitHub).
MAX_FOLDERS = 50


def _wanted(path: str) -> bool:
    return kind_of(path) is not None and not bots_own(path)


def local(folder: Path, root: Path, limit: int) -> tuple[list[Path], list[str]]:
    """The path-scoped rule files under ``folder`` (a checkout, or one of FOLDERS itself), and
    the rules folders not searched because they are links out of ``root``."""
    found: list[Path] = []
    linked_out: list[str] = []
    tails = [tuple(name.split("/")) for name in FOLDERS]
    own = folder.resolve().parts
    starts = [folder] if any(own[-len(t) :] == t for t in tails) else [folder / f for f in FOLDERS]
    for start in starts:
        if not start.is_dir():
            continue
        if not local_files.inside(start, root):
            linked_out.append(start.relative_to(folder).as_posix() if start != folder else "")
            continue
        for top, folders, files in os.walk(start):  # links to folders are not followed
            folders.sort()
            for name in sorted(files):
                path = Path(top) / name
                if _wanted(path.as_posix()) and len(found) < limit:
                    found.append(path)
    return found, linked_out


def on_github(repository: Repository, ref: str, limit: int) -> Iterator[str]:
    """The paths of the path-scoped rule files of ``repository`` at ``ref``, folder by folder."""
    from github.GithubException import UnknownObjectException

    pending = list(FOLDERS)
    read = 0
    count = 0
    while pending and read < MAX_FOLDERS and count < limit:
        folder = pending.pop(0)
        read += 1
        try:
            listing: Any = repository.get_contents(folder, ref=ref)
        except UnknownObjectException:
            continue
        if not isinstance(listing, list):
            continue
        for entry in sorted(listing, key=lambda entry: entry.path):
            if entry.type == "dir":
                pending.append(entry.path)
            elif entry.type == "file" and _wanted(entry.path) and count < limit:
                count += 1
                yield entry.path

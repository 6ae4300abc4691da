"""The AGENTS.md sync's path-scoped rule files on GitHub: found, planned, and committed.

The bot writes and deletes only its own files: a `playbook-<area>` file of an agent's rules
directory that carries its marker line. Deleting one also takes its listing in
`RuleFileSync.files` (the bot wrote it); a person's file of such a name is never touched, and
the bot names its area otherwise.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from github import InputGitTreeElement
from github.GithubException import UnknownObjectException

from playbook.rules import block, scoped
from playbook.rules.scoped import FORMATS, Area, Format

# A directory with more `playbook-*` files than this is not one the bot made: the rest are
# left alone unread. Files over MAX_OWN_BYTES are not the bot's either (a file holds at most
# the block's budget of lessons), and are not downloaded to find out.
MAX_FILES = 100
MAX_OWN_BYTES = 256 * 1024


@dataclass(frozen=True)
class Found:
    """The `playbook-*` rule files of the agents' directories at one commit."""

    shas: dict[str, str] = field(default_factory=dict)  # path -> git blob sha, all of them
    managed: dict[str, bytes] = field(default_factory=dict)  # those with the bot's marker

    def taken(self, formats: Iterable[Format]) -> frozenset[str]:
        """Area names a person's file holds in one of ``formats``: the bot must name its own
        otherwise."""
        names = set()
        for path in self.shas:
            if path in self.managed:
                continue
            for fmt in formats:
                name = fmt.slug_of(path)
                if name is not None:
                    names.add(name)
        return frozenset(names)


@dataclass(frozen=True)
class FilesPlan:
    """The path-scoped files a sync wants, and how they differ from the default branch's."""

    areas: list[Area] = field(default_factory=list)
    formats: list[Format] = field(default_factory=list)
    wanted: dict[str, bytes] = field(default_factory=dict)  # every file kept, path -> bytes
    writes: dict[str, bytes] = field(default_factory=dict)  # those new or changed
    deletes: dict[str, bytes] = field(default_factory=dict)  # the bot's, no longer wanted
    existing: dict[str, bytes] = field(default_factory=dict)  # wanted paths' bytes on base
    old_ids: list[str] = field(default_factory=list)  # lessons in the bot's files on base
    recorded: dict[str, str] = field(default_factory=dict)  # for RuleFileSync.files
    left_alone: list[str] = field(default_factory=list)  # a person's playbook-* files
    directories: list[str] = field(default_factory=list)  # where to look on the branch
    base: Found = field(default_factory=Found)

    @property
    def changes(self) -> bool:
        """Whether the default branch lacks a file the sync wants or holds one it removes."""
        return bool(self.writes or self.deletes)


def formats_of(names: Sequence[str]) -> list[Format]:
    """The formats the settings name, in the settings' order."""
    return [FORMATS[name] for name in names if name in FORMATS]


def directories(formats: Iterable[Format], recorded: Mapping[str, str]) -> list[str]:
    """The directories to look in: the wanted formats', and those of files the bot wrote."""
    found = {fmt.directory for fmt in formats}
    for path in recorded:
        found |= {fmt.directory for fmt in FORMATS.values() if fmt.slug_of(path) is not None}
    return sorted(found)


def _listing(gh: Any, directory: str, ref: str) -> list[Any]:
    try:
        found = gh.get_contents(directory, ref=ref)
    except UnknownObjectException:
        return []
    return found if isinstance(found, list) else []  # a file of that name: no rules there


def _own_files(gh: Any, dirs: Sequence[str], ref: str) -> list[Any]:
    """The `playbook-*` files of ``dirs`` at ``ref`` (at most MAX_FILES a directory)."""
    files = []
    for directory in dirs:
        mine = [
            item
            for item in _listing(gh, directory, ref)
            if item.type == "file"
            and any(fmt.slug_of(item.path) is not None for fmt in FORMATS.values())
        ]
        files += sorted(mine, key=lambda item: item.path)[:MAX_FILES]
    return files


def find(gh: Any, dirs: Sequence[str], ref: str) -> Found:
    """The `playbook-*` files of ``dirs`` at ``ref``, and the bytes of those that are the bot's."""
    found = Found()
    for item in _own_files(gh, dirs, ref):
        found.shas[item.path] = item.sha
        if item.size > MAX_OWN_BYTES:
            continue
        data = base64.b64decode(gh.get_git_blob(item.sha).content)
        if scoped.is_managed(data):
            found.managed[item.path] = data
    return found


def plan(
    found: Found,
    formats: Sequence[Format],
    areas: Sequence[Area],
    recorded: Mapping[str, str],
    *,
    scope: str,
    dirs: Sequence[str],
) -> FilesPlan:
    """The files ``areas`` make in each of ``formats``, against the default branch's ``found``."""
    wanted = {
        fmt.path(area.slug): scoped.render(fmt, area, scope=scope)
        for fmt in formats
        for area in areas
    }
    writes = {path: data for path, data in wanted.items() if found.managed.get(path) != data}
    deletes = {
        path: data
        for path, data in found.managed.items()
        if path in recorded and path not in wanted
    }
    existing = {path: found.managed[path] for path in wanted if path in found.managed}
    old_ids: list[str] = []
    for path in sorted({*existing, *deletes}):
        old_ids += block.ids_in(found.managed[path])
    # A deletion stays listed until the default branch has it: a closed PR must not orphan it.
    kept = {**wanted, **deletes}
    return FilesPlan(
        areas=list(areas),
        formats=list(formats),
        wanted=wanted,
        writes=writes,
        deletes=deletes,
        existing=existing,
        old_ids=old_ids,
        recorded={path: hashlib.sha256(data).hexdigest() for path, data in sorted(kept.items())},
        left_alone=sorted(path for path in found.shas if path not in found.managed),
        directories=list(dirs),
        base=found,
    )


def blob_sha(data: bytes) -> str:
    """Git's id of a blob of ``data`` (as GitHub lists it)."""
    return hashlib.sha1(f"blob {len(data)}\0".encode() + data).hexdigest()


def branch_holds(gh: Any, files: FilesPlan, branch_sha: str) -> bool:
    """Whether the sync branch's `playbook-*` files are those the plan makes of the base's."""
    if not files.directories:
        return True
    expected = dict(files.base.shas)
    expected.update({path: blob_sha(data) for path, data in files.wanted.items()})
    for path in files.deletes:
        expected.pop(path, None)
    on_branch = {item.path: item.sha for item in _own_files(gh, files.directories, branch_sha)}
    return on_branch == expected


def commit(gh: Any, base: str, message: str, path: str, desired: bytes, files: FilesPlan) -> str:
    """One commit on top of ``base``: the block file (bytes exact: a base64 blob), the area
    files written, and the bot's stale ones deleted, in one tree."""
    blob = gh.create_git_blob(base64.b64encode(desired).decode("ascii"), "base64")
    elements = [InputGitTreeElement(path, "100644", "blob", sha=blob.sha)]
    for written, data in sorted(files.writes.items()):
        # The bot's own text, always UTF-8: sent inline rather than one blob request each.
        elements.append(InputGitTreeElement(written, "100644", "blob", content=data.decode()))
    for deleted in sorted(files.deletes):
        elements.append(InputGitTreeElement(deleted, "100644", "blob", sha=None))
    parent = gh.get_git_commit(base)
    tree = gh.create_git_tree(elements, parent.tree)
    return gh.create_git_commit(message, tree, [parent]).sha

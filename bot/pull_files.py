"""A pull request's changed files, through GitHub's "List pull requests files" endpoint."""

from __future__ import annotations

from collections.abc import Callable
from contextvars import ContextVar
from itertools import islice
from typing import Any
from urllib.parse import quote

from github.File import File
from github.PaginatedList import PaginatedList

from bot import claims
from playbook.anchors.stale import FileChange
from playbook.anchors.symbols import PATCH_CHARS

# GitHub answers at most 3,000 files for a PR, 100 a page at most.
MAX_FILES = 3000
PER_PAGE = 100
# The patch text kept of one PR, all files together: what the symbols of stale lessons are
# looked for in (`playbook.anchors.symbols`), each file's cut at PATCH_CHARS.
PATCH_TOTAL = 1_000_000


def read_files(client: Any, repo: str, number: int) -> list[FileChange]:
    """The files PR ``number`` of ``repo`` changes: status, path, a rename's old path, and
    the start of each file's patch (GitHub gives none for a binary or an oversized diff).

    Raises PyGithub's exception on a failure (a 404 included: the caller decides).
    """
    url = f"/repos/{quote(repo, safe='/')}/pulls/{int(number)}/files"
    pages = PaginatedList(File, client.requester, url, {"per_page": PER_PAGE})
    changes = []
    budget = PATCH_TOTAL
    for changed in islice(pages, MAX_FILES):
        status, path = changed.status, changed.filename
        if not isinstance(status, str) or not isinstance(path, str):
            continue  # not GitHub's shape: nothing to match
        previous = changed.previous_filename
        patch = _bounded(changed.patch, min(PATCH_CHARS, budget))
        budget -= len(patch or "")
        changes.append(
            FileChange(status, path, previous if isinstance(previous, str) else None, patch)
        )
    return changes


# The files read during the delivery being handled in this thread: (its claim, PR key, files).
_read: ContextVar[tuple[claims.Claim, str, list[FileChange]] | None] = ContextVar(
    "pull_files_read", default=None
)


def once_per_delivery(key: str, read: Callable[[], list[FileChange]]) -> list[FileChange]:
    """``read()``'s files of PR ``key``, read once per attempt at a delivery.

    A merge's delivery asks for them for its lessons' anchors, the staleness flags and the
    anchored lessons' comment: one API call serves all. Keyed by the claim itself (a new one
    each attempt), so a retry reads afresh; outside the worker, every call reads.
    """
    claim = claims.current.get()
    if claim is None:
        return read()
    held = _read.get()
    if held is not None and held[0] is claim and held[1] == key:
        return list(held[2])
    files = read()
    _read.set((claim, key, list(files)))
    return files


def _bounded(patch: object, most: int) -> str | None:
    """At most ``most`` characters of ``patch``, cut at a line's end (a cut name is no name)."""
    if not isinstance(patch, str) or most <= 0:
        return None
    if len(patch) <= most:
        return patch
    cut = patch.rfind("\n", 0, most + 1)
    return patch[:cut] if cut > 0 else None

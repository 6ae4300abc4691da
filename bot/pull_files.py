"""A pull request's changed files, through GitHub's "List pull requests files" endpoint."""

from __future__ import annotations

from itertools import islice
from typing import Any
from urllib.parse import quote

from github.File import File
from github.PaginatedList import PaginatedList

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


def _bounded(patch: object, most: int) -> str | None:
    """At most ``most`` characters of ``patch``, cut at a line's end (a cut name is no name)."""
    if not isinstance(patch, str) or most <= 0:
        return None
    if len(patch) <= most:
        return patch
    cut = patch.rfind("\n", 0, most + 1)
    return patch[:cut] if cut > 0 else None

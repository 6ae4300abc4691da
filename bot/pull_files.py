"""A pull request's changed files, through GitHub's "List pull requests files" endpoint."""

from __future__ import annotations

from itertools import islice
from typing import Any
from urllib.parse import quote

from github.File import File
from github.PaginatedList import PaginatedList

from playbook.anchors.stale import FileChange

# GitHub answers at most 3,000 files for a PR, 100 a page at most.
MAX_FILES = 3000
PER_PAGE = 100


def read_files(client: Any, repo: str, number: int) -> list[FileChange]:
    """The files PR ``number`` of ``repo`` changes: status, path, and a rename's old path.

    Raises PyGithub's exception on a failure (a 404 included: the caller decides).
    """
    url = f"/repos/{quote(repo, safe='/')}/pulls/{int(number)}/files"
    pages = PaginatedList(File, client.requester, url, {"per_page": PER_PAGE})
    changes = []
    for changed in islice(pages, MAX_FILES):
        status, path = changed.status, changed.filename
        if not isinstance(status, str) or not isinstance(path, str):
            continue  # not GitHub's shape: nothing to match
        previous = changed.previous_filename
        changes.append(FileChange(status, path, previous if isinstance(previous, str) else None))
    return changes

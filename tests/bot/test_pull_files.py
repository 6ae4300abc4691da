"""A PR's changed files read from the fake GitHub: paths, renames and a bounded patch each."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from bot import pull_files
from playbook.anchors.stale import FileChange
from playbook.anchors.symbols import PATCH_CHARS
from tests.fakes.github import FakeGitHub
from tests.fakes.test_fake_github_git import TOKEN, client
from tests.loop_harness import _KEYS, APP_ID, INSTALLATION

REPO = "octo-org/shop"


@pytest.fixture
def fake() -> Iterator[FakeGitHub]:
    server = FakeGitHub(app_id=APP_ID, public_key=_KEYS[1])
    server.start()
    server.add_installation(INSTALLATION)
    server.add_repo(REPO)
    server.personal_tokens.add(TOKEN)
    server.add_pull(REPO, 7, title="Locks by advisory lock")
    yield server
    server.stop()


def test_each_file_keeps_its_patch_cut_at_a_line_end(fake: FakeGitHub) -> None:
    small = "@@ -1,2 +1,1 @@\n-def acquire(o):\n+def take(o):\n"
    big = "@@ -1,9000 +1,1 @@\n" + "-x = 1\n" * (PATCH_CHARS // 5)
    fake.add_pull_file(REPO, 7, "orders/locking.py", small)
    fake.add_pull_file(REPO, 7, "orders/big.py", big)
    fake.add_pull_file(REPO, 7, "logo.png", None, status="added")  # binary: no patch
    fake.add_pull_file(REPO, 7, "orders/b.py", "", status="renamed", previous="orders/a.py")
    read = pull_files.read_files(client(fake), REPO, 7)
    assert read[0] == FileChange("modified", "orders/locking.py", None, small)
    kept = read[1].patch or ""
    assert len(kept) <= PATCH_CHARS and big.startswith(kept) and kept.endswith("-x = 1")
    assert read[2] == FileChange("added", "logo.png", None, None)
    assert (read[3].path, read[3].previous) == ("orders/b.py", "orders/a.py")


def test_the_patches_of_one_pr_are_bounded_together(fake: FakeGitHub) -> None:
    patch = "@@ -1,1 +1,1 @@\n" + "-y = 2\n" * ((PATCH_CHARS - 100) // 7)
    count = pull_files.PATCH_TOTAL // len(patch) + 3
    for n in range(count):
        fake.add_pull_file(REPO, 7, f"gen/f{n}.py", patch)
    read = pull_files.read_files(client(fake), REPO, 7)
    assert len(read) == count  # every file is listed; past the budget, without its patch
    assert sum(len(change.patch or "") for change in read) <= pull_files.PATCH_TOTAL
    assert read[0].patch == patch and read[-1].patch is None

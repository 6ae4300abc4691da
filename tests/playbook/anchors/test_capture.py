"""The anchors a lesson captured from a PR gets from the PR's changed files."""

from __future__ import annotations

import pytest

from playbook.anchors.capture import from_changes, incidental
from playbook.anchors.fields import check_paths
from playbook.anchors.stale import FileChange


def _files(*paths: str, status: str = "modified") -> list[FileChange]:
    return [FileChange(status, path) for path in paths]


ORDERS_40 = [f"orders/{sub}/file_{n}.py" for sub in ("api", "db") for n in range(20)]


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        ([], None),
        (_files("orders/locking.py"), ["orders/locking.py"]),
        (_files("orders/locking.py", "mail/send.py"), ["orders/locking.py", "mail/send.py"]),
        (_files("a.py", "b/c.py", "d/e/f.py"), ["a.py", "b/c.py", "d/e/f.py"]),
        # Four files or more: their common directory.
        (_files(*ORDERS_40), ["orders/**"]),
        (_files(*(f"orders/api/v{n}.py" for n in range(9))), ["orders/api/**"]),
        # A few top-level groups: one glob each; a root file as itself.
        (
            _files("orders/a.py", "orders/b/c.py", "mail/x.py", "pyproject.toml"),
            ["orders/**", "mail/**", "pyproject.toml"],
        ),
        # Everywhere: nothing.
        (_files("a/1.py", "b/2.py", "c/3.py", "d/4.py"), None),
        (_files("setup.py", "tox.ini", "Makefile", "README.md"), None),
        # Lock files and changelogs are no lesson's subject; `changes.py` is code.
        (_files("orders/locking.py", "poetry.lock", "CHANGELOG.md"), ["orders/locking.py"]),
        (_files("package-lock.json", "yarn.lock", "go.sum", "CHANGES.rst"), None),
        (_files("orders/changes.py"), ["orders/changes.py"]),
        # The same file twice (GitHub never, a retry's list perhaps) counts once.
        (_files("a/x.py", "a/x.py"), ["a/x.py"]),
        # A path the anchors validator refuses is dropped, never an error.
        (_files("../etc/passwd", "orders/a.py"), ["orders/a.py"]),
    ],
)
def test_the_rule(changes: list[FileChange], expected: list[str] | None) -> None:
    assert from_changes(changes) == expected
    if expected:
        assert check_paths(expected) == expected  # always a lesson's valid anchors


def test_removed_files_are_left_out_and_a_rename_counts_by_its_new_path() -> None:
    changes = [
        FileChange("removed", "orders/old.py"),
        FileChange("renamed", "orders/new.py", "orders/older.py"),
        *_files("orders/a.py", "orders/b.py"),
        FileChange("removed", "web/gone.py"),
    ]
    assert from_changes(changes) == ["orders/new.py", "orders/a.py", "orders/b.py"]
    assert from_changes([FileChange("removed", "orders/old.py")]) is None


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("poetry.lock", True),
        ("web/package-lock.json", True),
        ("Cargo.lock", True),
        ("CHANGELOG.md", True),
        ("docs/changelog.rst", True),
        ("HISTORY.txt", True),
        ("orders/locking.py", False),
        ("history/models.py", False),
        ("changes.py", False),
    ],
)
def test_incidental_files(path: str, expected: bool) -> None:
    assert incidental(path) is expected


def test_a_pr_of_three_thousand_files_in_one_folder_is_read_at_once() -> None:
    changes = _files(*(f"gen/{n}.py" for n in range(3000)))
    assert from_changes(changes) == ["gen/**"]

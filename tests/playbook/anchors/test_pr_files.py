"""Which changed files a lesson's globs match: `**` at any depth, fnmatch within a segment."""

from __future__ import annotations

import pytest

from playbook.anchors.pr_files import MAX_FILES, Anchored, ChangedFile, anchored, matches


@pytest.mark.parametrize(
    ("glob", "path", "expected"),
    [
        ("orders/locking.py", "orders/locking.py", True),
        ("orders/locking.py", "orders/locking.pyc", False),
        ("orders", "orders/locking.py", True),  # a plain name: the directory too
        ("orders/", "orders/deep/er/x.py", True),
        ("orders", "orders_v2/x.py", False),
        ("orders/*.py", "orders/locking.py", True),
        ("orders/*.py", "orders/sub/locking.py", False),  # `*` never crosses a `/`
        ("orders/**", "orders/sub/locking.py", True),
        ("orders/**/*.py", "orders/locking.py", True),  # `**` is none too
        ("**/locking.py", "a/b/c/locking.py", True),
        ("**/locking.py", "locking.py", True),
        ("*.py", "setup.py", True),
        ("*.py", "src/setup.py", False),
        ("src/[ab]?.py", "src/a1.py", True),
        ("src/[!ab]?.py", "src/a1.py", False),
        ("Orders/**", "orders/x.py", False),  # git's paths are case-sensitive
        ("**", "anything/at/all.py", False),  # a catch-all anchors nothing
        ("**/**", "x.py", False),
        ("", "x.py", False),
    ],
)
def test_the_matching_rule(glob: str, path: str, expected: bool) -> None:
    assert matches(glob, path) is expected


def test_many_double_stars_over_a_deep_path_end_at_once() -> None:
    # A backtracking matcher takes exponential time here; this one answers no at once.
    glob = "/".join(["**", "a"] * 30) + "/b"
    assert not matches(glob, "/".join(["a"] * 60))


def test_oversized_globs_and_paths_match_nothing() -> None:
    assert not matches("x" * 301, "x" * 301)
    assert not matches("**/x.py", "d/" * 600 + "x.py")


def test_lessons_with_the_files_they_match_renames_by_either_path() -> None:
    changed = [
        ChangedFile("orders/locking.py", previous="orders/lock.py"),
        ChangedFile("orders/models.py"),
        ChangedFile("README.md"),
    ]
    lessons = [
        ("pb-1", ["orders/lock.py"]),  # the old path of a renamed file
        ("pb-2", ["orders/**", "README.md"]),
        ("pb-3", ["mail/**"]),
        ("pb-4", None),  # unanchored
        ("pb-5", "orders/**"),  # not a list: ignored, never read as characters
        ("pb-6", ["**", 7]),
    ]
    assert anchored(lessons, changed) == [
        Anchored("pb-1", ("orders/locking.py",)),
        Anchored("pb-2", ("orders/locking.py", "orders/models.py", "README.md")),
    ]


def test_only_the_files_github_lists_are_read() -> None:
    changed = [ChangedFile(f"a/{i}.py") for i in range(MAX_FILES)] + [ChangedFile("late/x.py")]
    assert anchored([("pb-1", ["late/**"])], changed) == []

"""Which lessons a PR's changed files touch (the glob rule itself: test_globs)."""

from __future__ import annotations

from playbook.anchors.pr_files import MAX_FILES, Anchored, ChangedFile, anchored


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

"""Anchor globs: which repository paths a lesson's ``paths`` are about."""

from __future__ import annotations

import pytest

from playbook.anchors.match import MAX_CHARS, is_literal, matches, matches_any


@pytest.mark.parametrize(
    ("pattern", "path"),
    [
        ("orders/locking.py", "orders/locking.py"),
        ("./orders/locking.py", "orders/locking.py"),
        ("orders/*.py", "orders/locking.py"),
        ("orders/lock?ng.py", "orders/locking.py"),
        ("orders/[kl]ocking.py", "orders/locking.py"),
        ("orders/**", "orders/locking.py"),
        ("orders/**", "orders/db/rows/locking.py"),
        ("orders/", "orders/db/locking.py"),
        ("**/test_*.py", "test_orders.py"),
        ("**/test_*.py", "tests/unit/test_orders.py"),
        ("a/**/b.py", "a/b.py"),
        ("a/**/b.py", "a/x/y/b.py"),
        ("**", "anything/at/all.txt"),
        ("src/**/*.ts", "src/app/main.ts"),
    ],
)
def test_matches(pattern: str, path: str) -> None:
    assert matches(path, pattern)


@pytest.mark.parametrize(
    ("pattern", "path"),
    [
        ("orders/locking.py", "orders/Locking.py"),  # case-sensitive, like git on Linux
        ("orders/*.py", "orders/db/locking.py"),  # `*` stays inside one segment
        ("*.py", "orders/locking.py"),  # no bare-name matching at any depth
        ("orders", "orders/locking.py"),  # a directory is `orders/` or `orders/**`
        ("orders/**", "orders"),  # `orders/**` is what is under it
        ("orders/**", "ordersx/a.py"),
        ("a/**/b.py", "a/x/c.py"),
        ("orders/[!l]ocking.py", "orders/locking.py"),
        ("", "orders/locking.py"),
        ("orders/locking.py", ""),
    ],
)
def test_does_not_match(pattern: str, path: str) -> None:
    assert not matches(path, pattern)


def test_many_double_stars_stay_fast_and_bounded() -> None:
    # Linear in the segments: no backtracking however many `**` a hostile pattern has.
    pattern = "/".join(["**"] * 200 + ["x"])
    path = "/".join(["a"] * 1000) + "/y"
    assert not matches(path, pattern)
    assert matches(path[:-1] + "x", pattern)
    assert not matches("a" * (MAX_CHARS + 1), "**")


def test_literal_and_any() -> None:
    assert is_literal("orders/a.py")
    assert not is_literal("orders/*.py")
    assert not is_literal("orders/")
    assert matches_any("b/c.py", ["a/**", "b/*.py"])
    assert not matches_any("b/c.py", [])

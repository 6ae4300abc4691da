"""The one glob rule: which repository paths a lesson's ``paths`` are about."""

from __future__ import annotations

import pytest

from playbook.anchors import globs
from playbook.anchors.globs import Index, anchors_nothing, compile_glob, is_plain, matches

RULE = [
    # A glob without a wildcard: that file, or the directory and everything under it.
    ("orders/locking.py", "orders/locking.py", True),
    ("orders/locking.py", "orders/locking.pyc", False),
    ("orders/locking.py", "orders/Locking.py", False),  # case-sensitive, as git's paths are
    ("orders", "orders/locking.py", True),
    ("orders", "orders/deep/er/x.py", True),
    ("orders", "orders", True),
    ("orders", "orders_v2/x.py", False),
    ("./orders/locking.py", "orders/locking.py", True),
    ("orders/locking.py", "./orders/locking.py", True),
    # `dir/` and `dir/**`: what is under the directory, not the directory itself.
    ("orders/", "orders/deep/er/x.py", True),
    ("orders/", "orders", False),
    ("orders/**", "orders/locking.py", True),
    ("orders/**", "orders/db/rows/locking.py", True),
    ("orders/**", "orders", False),
    ("orders/**", "ordersx/a.py", False),
    ("Orders/**", "orders/x.py", False),
    # `*`, `?` and `[seq]` stay inside one segment.
    ("orders/*.py", "orders/locking.py", True),
    ("orders/*.py", "orders/sub/locking.py", False),
    ("orders/lock?ng.py", "orders/locking.py", True),
    ("orders/[kl]ocking.py", "orders/locking.py", True),
    ("orders/[!l]ocking.py", "orders/locking.py", False),
    ("src/[ab]?.py", "src/a1.py", True),
    ("*.py", "setup.py", True),
    ("*.py", "src/setup.py", False),  # no bare-name matching at any depth
    ("orders/*", "orders/a.py", True),
    ("orders/*", "orders/x/a.py", False),
    ("orders**", "orders_v2", True),  # not a whole segment: two `*`
    ("orders**", "orders_v2/a.py", False),
    # `**` as a whole segment: any number of segments, none included.
    ("**/locking.py", "locking.py", True),
    ("**/locking.py", "a/b/c/locking.py", True),
    ("**/test_*.py", "tests/unit/test_orders.py", True),
    ("a/**/b.py", "a/b.py", True),
    ("a/**/b.py", "a/x/y/b.py", True),
    ("a/**/b.py", "a/x/c.py", False),
    ("orders/**/*.py", "orders/locking.py", True),
    ("src/**/*.ts", "src/app/main.ts", True),
    ("**/tests/**", "pkg/tests/a.py", True),
    ("**/tests/**", "pkg/tests", False),
    # A glob of `**` segments only anchors nothing; an empty one neither.
    ("**", "anything/at/all.py", False),
    ("**/**", "x.py", False),
    ("**/", "x.py", False),
    ("", "x.py", False),
    ("orders/locking.py", "", False),
]


@pytest.mark.parametrize(("glob", "path", "expected"), RULE)
def test_the_rule(glob: str, path: str, expected: bool) -> None:
    assert matches(glob, path) is expected


@pytest.mark.parametrize(("glob", "path", "expected"), RULE)
def test_the_index_answers_as_the_rule_does(glob: str, path: str, expected: bool) -> None:
    index = Index(["elsewhere/x.py", path, "orders_v3/y.py"])
    assert (1 in index.matching([glob])) is expected


def test_many_double_stars_over_a_deep_path_end_at_once() -> None:
    # A backtracking matcher takes exponential time here; the DP answers at once.
    glob = "/".join(["**", "a"] * 30) + "/b"
    assert not matches(glob, "/".join(["a"] * 60))
    assert matches(glob, "/".join(["a"] * 60) + "/b")


def test_oversized_globs_and_paths_match_nothing() -> None:
    assert not matches("x" * (globs.MAX_GLOB_CHARS + 1), "x" * (globs.MAX_GLOB_CHARS + 1))
    assert not matches("**/x.py", "d/" * globs.MAX_PATH_SEGMENTS + "x.py")
    assert not matches("a/**", "a/" + "b" * globs.MAX_PATH_CHARS)
    assert not matches("/".join(["a"] * (globs.MAX_GLOB_SEGMENTS + 1)), "a/a")
    assert not matches(None, "a.py")  # type: ignore[arg-type]


def test_plain_names_and_globs_that_anchor_nothing() -> None:
    assert is_plain("orders/a.py") and is_plain("orders")
    assert not is_plain("orders/*.py") and not is_plain("orders/") and not is_plain("**")
    assert anchors_nothing("**") and anchors_nothing("**/**/") and anchors_nothing("")
    assert not anchors_nothing("**/a.py")
    compiled = compile_glob("src/**/ClientCnxn.java")
    assert compiled is not None
    assert compiled.literal_tail(1) == ("ClientCnxn.java",)
    assert compiled.literal_tail(2) is None


def test_the_index_reads_only_the_paths_a_plain_head_can_match() -> None:
    paths = [f"pkg{i}/mod.py" for i in range(3_000)] + ["orders/a.py", "orders/x/b.py"]
    index = Index(paths)
    assert sorted(index.matching(["orders/*.py", "orders/x"])) == [3_000, 3_001]
    assert len(index.matching(["**/mod.py"])) == 3_000
    assert index.matching(["**", "", 7]) == set()

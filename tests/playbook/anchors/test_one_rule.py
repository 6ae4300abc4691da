"""Staleness, the PR comment and retrieval read an anchor by the same rule (`globs`)."""

from __future__ import annotations

import pytest
from sqlalchemy import Engine

from playbook.anchors import stale
from playbook.anchors.matching import Named, match, named_in
from playbook.anchors.pr_files import ChangedFile, anchored
from playbook.anchors.stale import FileChange
from playbook.db import transaction
from playbook.lessons import lifecycle

# Where retrieval's leniency (a prefix on the ticket's path, a bare file name) has nothing to
# add: the three features must answer alike.
AGREED = [
    ("orders", "orders/a.py", True),  # a plain name is the directory too, in all three
    ("orders", "orders/x/y.py", True),
    ("orders/", "orders/a.py", True),
    ("orders/**", "orders", False),
    ("orders/*.py", "orders/sub/a.py", False),  # `*` never crosses a `/`
    ("orders/*.py", "orders/a.py", True),
    ("a/**/b.py", "a/b.py", True),
    ("Orders/a.py", "orders/a.py", False),
    ("**", "a.py", False),  # a catch-all anchors nothing anywhere
    ("**/**", "orders/a.py", False),
    ("orders/locking.py", "orders/locking.py", True),
    ("orders/locking.py", "orders/locking.pyc", False),
]


def _staleness(engine: Engine, glob: str, path: str) -> bool:
    with transaction(engine) as session:
        lesson = lifecycle.add(session, "Lock rows in id order", learned_from="X-1", actor="t")
        lesson.bullet.paths = [glob]
        flagged = stale.flag(
            session, "global", "acme/api#7", [FileChange("modified", path)], actor="bot"
        )
        return [one.bullet_id for one in flagged] == [lesson.bullet.id]


@pytest.mark.parametrize(("glob", "path", "expected"), AGREED)
def test_the_three_features_agree(engine: Engine, glob: str, path: str, expected: bool) -> None:
    assert _staleness(engine, glob, path) is expected
    assert bool(anchored([("pb-1", [glob])], [ChangedFile(path)])) is expected
    assert (match(Named(paths=(path,)), [glob], None) is not None) is expected


def test_retrieval_takes_a_prefixed_path_the_others_do_not() -> None:
    # The leniency is retrieval's own step: a stack trace's path carries the checkout's prefix.
    path = "src/main/java/org/x/Foo.java"
    assert match(Named(paths=(path,)), ["org/x/Foo.java"], None) == "org/x/Foo.java"
    assert match(Named(paths=(path,)), ["org/**"], None) == f"org/** ({path})"
    assert not anchored([("pb-1", ["org/x/Foo.java"])], [ChangedFile(path)])


def test_a_bare_file_name_matches_an_anchor_ending_in_it_exactly() -> None:
    anchor = "zookeeper-server/src/main/java/org/apache/zookeeper/ClientCnxn.java"
    named = Named(paths=("ClientCnxn.java",))
    assert match(named, [anchor], None) == f"{anchor} (ClientCnxn.java)"
    assert match(named, ["src/**/ClientCnxn.java"], None) is not None
    # The exact last segment: not a glob's wildcard, not another file, not a case variant.
    for other in ("src/*.java", "src/clientcnxn.java", "src/XClientCnxn.java", "src/**"):
        assert match(named, [other], None) is None, other
    assert match(Named(paths=("locking.py",)), ["orders/locking.py"], None) == (
        "orders/locking.py (locking.py)"
    )


def test_a_java_stack_trace_matches_by_its_class_and_its_file() -> None:
    frame = "at org.apache.zookeeper.ClientCnxn$SendThread.run(ClientCnxn.java:1063)"
    named = named_in(f"Session expired\n{frame}")
    assert "org/apache/zookeeper/ClientCnxn.java" in named.paths
    assert "ClientCnxn.java" in named.paths
    anchor = "zookeeper-server/src/main/java/org/apache/zookeeper/ClientCnxn.java"
    assert match(named, [anchor], None) is not None
    # The class alone, as a ticket's text names it, is enough.
    by_class = named_in("NPE in org.apache.zookeeper.ClientCnxn when the session closes")
    assert by_class.paths == ("org/apache/zookeeper/ClientCnxn.java",)
    assert match(by_class, [anchor], None) == (f"{anchor} (org/apache/zookeeper/ClientCnxn.java)")
    # Another package's class of the same name is not this file.
    other = named_in("NPE in org.apache.curator.ClientCnxn")
    assert match(other, [anchor], None) is None


@pytest.mark.parametrize(
    "text",
    [
        "self.Client.close()",  # one lower-case part: no package
        "os.path.join",  # no class
        "OrderLock.acquire",  # no package
        "com.Shop.orders.Lock",  # a package part capitalised before the class
    ],
)
def test_dotted_names_that_are_no_java_class_name_no_file(text: str) -> None:
    assert not any(path.endswith(".java") for path in named_in(text).paths)


def test_class_names_are_bounded() -> None:
    deep = ".".join(["a"] * 10_000) + ".Foo"
    named = named_in(deep)
    assert not any(path.endswith(".java") for path in named.paths)

"""A merged PR that removes a symbol a lesson names flags the lesson; a move or a new
signature does not, and a file GitHub gives no patch for says nothing."""

from __future__ import annotations

from playbook.anchors.symbols import PATCH_CHARS
from playbook.db import transaction
from playbook.lessons import lifecycle
from tests.loop_harness import Loop
from tests.payloads import REPO, pull_request

PR = f"{REPO}#2"
REMOVES_ACQUIRE = (
    "@@ -10,7 +10,4 @@ class OrderLock:\n"
    "     def __init__(self, rows):\n"
    "         self.rows = rows\n"
    "-    def acquire(self, order_id):\n"
    "-        return self.rows.lock(order_id)\n"
    "-\n"
    "-    def release(self, order_id):\n"
    "+    def release(self, order_id, force=False):\n"
    "         self.rows.unlock(order_id)\n"
)


def _lesson(loop: Loop, text: str, **anchors: object) -> str:
    with transaction(loop.engine) as session:
        added = lifecycle.add(
            session, text, learned_from="CTMS-1", actor="t", scope=REPO, **anchors
        )
        return added.bullet.id


def _merge(loop: Loop, files: list[tuple[str, str, str | None]], number: int = 2) -> None:
    if REPO not in loop.github.repos:
        loop.github.add_repo(REPO)
    loop.github.add_pull(REPO, number, title="CTMS-4337: locks by advisory lock")
    for status, path, patch in files:
        loop.github.add_pull_file(REPO, number, path, patch, status=status)
    loop.github_event("pull_request.closed", pull_request("closed", number=number, merged=True))
    loop.process()


def _detail(loop: Loop, bullet_id: str) -> str | None:
    with transaction(loop.engine) as session:
        return lifecycle.get(session, bullet_id).stale_detail


def test_a_removed_symbol_flags_the_lessons_that_name_it(loop: Loop) -> None:
    anchored = _lesson(
        loop, "Acquire the order lock first", paths="orders/locking.py", symbols="acquire"
    )
    # No paths: every file of the PR is looked at; a dotted symbol counts by its last part.
    named_only = _lesson(
        loop, "OrderLock.acquire blocks: call it off the loop", symbols="OrderLock.acquire"
    )
    changed_signature = _lesson(loop, "release() unlocks the row", symbols="release")
    elsewhere = _lesson(loop, "Payments acquire no lock", paths="payments/**", symbols="acquire")
    _merge(loop, [("modified", "orders/locking.py", REMOVES_ACQUIRE)])
    assert _detail(loop, anchored) == (
        f"{PR} modified orders/locking.py; removed symbol acquire in orders/locking.py"
    )
    assert _detail(loop, named_only) == f"{PR} removed symbol acquire in orders/locking.py"
    assert _detail(loop, changed_signature) is None  # defined again on a `+` line
    assert _detail(loop, elsewhere) is None  # removed outside the files its paths name
    # GitHub redelivers the merge: nothing is flagged twice.
    loop.github_event("pull_request.closed", pull_request("closed", merged=True))
    loop.process()
    with transaction(loop.engine) as session:
        revisions = lifecycle.history(session, named_only)
    assert [r.action for r in revisions].count("flag_stale") == 1


def test_a_removed_class_flags_the_lesson_naming_its_method(loop: Loop) -> None:
    lesson = _lesson(loop, "OrderLock.acquire takes the row lock", symbols="OrderLock.acquire")
    # The class is renamed; its method stays: the lesson's class is what is gone.
    patch = (
        "@@ -1,4 +1,4 @@\n"
        "-public final class OrderLock {\n"
        "+public final class RowLock {\n"
        "     public void acquire(long id) {\n"
    )
    _merge(loop, [("modified", "src/main/java/shop/OrderLock.java", patch)])
    assert _detail(loop, lesson) == (
        f"{PR} removed symbol OrderLock in src/main/java/shop/OrderLock.java"
    )


def test_a_move_to_another_file_flags_nothing(loop: Loop) -> None:
    lesson = _lesson(loop, "Acquire the order lock first", symbols="acquire")
    moved_in = "@@ -0,0 +1,2 @@\n+def acquire(order_id):\n+    return lock(order_id)\n"
    moved_out = "@@ -1,2 +0,0 @@\n-def acquire(order_id):\n-    return lock(order_id)\n"
    _merge(
        loop,
        [("modified", "orders/locking.py", moved_out), ("added", "orders/locks.py", moved_in)],
    )
    assert _detail(loop, lesson) is None


def test_without_a_patch_nothing_is_said_of_symbols(loop: Loop) -> None:
    lesson = _lesson(loop, "Acquire the order lock first", symbols="acquire")
    # GitHub gives no patch for a binary file or an oversized diff; past what is kept of a
    # patch, a removal is not read either.
    late = "@@ -1,9000 +1,1 @@\n" + "-x = 1\n" * (PATCH_CHARS // 7) + "-def acquire(o):\n"
    _merge(loop, [("modified", "orders/locking.py", None), ("modified", "orders/big.py", late)])
    assert _detail(loop, lesson) is None

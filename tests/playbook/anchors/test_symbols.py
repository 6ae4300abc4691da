"""Which definitions a PR's patches remove: a small set of declarations, read line by line."""

from __future__ import annotations

import pytest

from playbook.anchors.symbols import LINE_CHARS, PATCH_CHARS, definitions, keys, removed


@pytest.mark.parametrize(
    ("line", "names"),
    [
        ("def acquire(self, order_id):", {"acquire"}),
        ("    async def acquire(self):", {"acquire"}),
        ("class OrderLock(Base):", {"OrderLock"}),
        ("class OrderLock:", {"OrderLock"}),
        ("export function acquire(lock) {", {"acquire"}),
        ("async function* rows() {", {"rows"}),
        ("func acquire(id int) error {", {"acquire"}),
        ("func (l *OrderLock) acquire(id int) error {", {"acquire"}),
        ("type OrderLock struct {", {"OrderLock"}),
        ("pub fn acquire<T>(lock: &T) {", {"acquire"}),
        ("    override fun acquire(id: Long) {", {"acquire"}),
        ("fun OrderLock.acquire() = Unit", {"acquire"}),
        ("public final class OrderLock implements Lock {", {"OrderLock"}),
        ("    public synchronized Lock acquire(long id) throws Timeout {", {"acquire"}),
        ("    @Override public void acquire() {", {"acquire"}),
        ("    private static <T> List<T> rows(Map<String, T> byId) {", {"rows"}),
        ("    public async Task<int> AcquireAsync(int id)", {"AcquireAsync"}),
        ("public interface Lock {", {"Lock"}),
        ("enum State { OPEN, CLOSED }", {"State"}),
        # Calls, statements and assignments define nothing.
        ("    lock.acquire(order_id)", set()),
        ("    return acquire(order_id)", set()),
        ("    if acquire(order_id):", set()),
        ("    } else if (acquire(id)) {", set()),
        ("    Lock lock = new OrderLock(id);", set()),
        ("    throw new LockTimeout(id);", set()),
        ("    raise LockTimeout(order_id)", set()),
        ("    x = acquire(order_id)", set()),
        ("    # acquire(lock) before the check", set()),
        ("    // then acquire(lock)", set()),
        ("    go acquire(id)", set()),
        ("", set()),
    ],
)
def test_declarations(line: str, names: set[str]) -> None:
    assert definitions(line) == names


def test_a_removed_definition_not_added_back_is_removed() -> None:
    patch = (
        "@@ -1,9 +1,5 @@\n"
        " class OrderLock:\n"
        "-    def acquire(self, order_id):\n"
        "-        return self.rows.lock(order_id)\n"
        "-    def release(self, order_id):\n"
        "+    def release(self, order_id, force=False):\n"  # a signature change
        "         pass\n"
    )
    assert removed([("orders/locking.py", patch)]) == {"acquire": ["orders/locking.py"]}


def test_a_move_to_another_file_is_no_removal() -> None:
    old = "@@ -1,3 +0,0 @@\n-def acquire(order_id):\n-    pass\n"
    new = "@@ -0,0 +1,3 @@\n+def acquire(order_id):\n+    pass\n"
    assert removed([("orders/locking.py", old), ("orders/locks.py", new)]) == {}
    # Without the new file's patch (binary, oversized), what is read is all there is.
    assert removed([("orders/locking.py", old), ("orders/locks.py", None)]) == {
        "acquire": ["orders/locking.py"]
    }


def test_keys_are_the_last_part_then_its_class() -> None:
    assert keys("OrderLock.acquire") == ("acquire", "OrderLock")
    assert keys("acquire") == ("acquire",)
    assert keys("com.shop.OrderLock.acquire") == ("acquire", "OrderLock")


def test_reading_is_bounded() -> None:
    # A hostile line or patch is read up to its bound, in linear time.
    assert definitions("x " * 100_000 + "def late():") == set()
    assert definitions("def " + "a" * (LINE_CHARS * 10)) == {"a" * (LINE_CHARS - 4)}
    assert definitions("func (" + "(" * 50_000) == set()
    assert definitions("fun " + "<" * 50_000 + "x") == set()
    late = "-x\n" * (PATCH_CHARS // 3) + "-def late():\n"
    assert removed([("a.py", late)]) == {}

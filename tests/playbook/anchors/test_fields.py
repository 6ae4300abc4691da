"""A lesson's anchors: repository-relative globs and code names, checked at every door."""

from __future__ import annotations

import pytest

from playbook.anchors import fields
from playbook.anchors.matching import Named, match, named_in
from playbook.lessons.fields import FieldProblem


def test_paths_are_normalised_and_repeats_dropped() -> None:
    given = "./orders/locking.py, orders//locking.py,src/*.ts, orders/ ,,"
    assert fields.check_paths(given) == ["orders/locking.py", "src/*.ts", "orders/**"]
    assert fields.check_paths(["orders/**"]) == ["orders/**"]
    assert fields.check_paths("") is None and fields.check_paths([]) is None
    assert fields.check_paths([".", "./", " "]) is None  # no path named: nothing anchored


@pytest.mark.parametrize(
    ("value", "why"),
    [
        ("../secrets.py", "'..'"),
        ("orders/../../etc/passwd", "'..'"),
        ("/etc/passwd", "absolute"),
        ("C:/repo/a.py", "absolute"),
        ("orders\\locking.py", "backslash"),
        ("orders/\x00a.py", "control character"),
        ("orders/\na.py", "control character"),
        ("a" * 201, "over 200 characters"),
    ],
)
def test_unsafe_paths_are_refused_with_the_field_named(value: str, why: str) -> None:
    with pytest.raises(FieldProblem) as caught:
        fields.check_paths([value])
    assert caught.value.field == "paths" and why in str(caught.value)
    assert str(caught.value).startswith("paths: ")


def test_at_most_ten_paths_and_ten_symbols() -> None:
    with pytest.raises(FieldProblem, match="11 paths, over the 10 allowed"):
        fields.check_paths([f"a{n}.py" for n in range(11)])
    assert len(fields.check_paths([f"a{n}.py" for n in range(11)], most=50) or []) == 11
    with pytest.raises(FieldProblem, match="11 symbols, over the 10 allowed"):
        fields.check_symbols([f"f{n}" for n in range(11)])


def test_symbols_are_identifiers() -> None:
    assert fields.check_symbols("OrderLock.acquire, _private, OrderLock.acquire") == [
        "OrderLock.acquire",
        "_private",
    ]
    for bad in ("9lives", "drop table", "a-b", "x" * 101, "naïve"):
        with pytest.raises(FieldProblem) as caught:
            fields.check_symbols([bad])
        assert caught.value.field == "symbols"
    with pytest.raises(FieldProblem, match="must be a list or comma-separated text"):
        fields.check_symbols(7)


def test_a_ticket_names_paths_and_symbols_from_its_stack_trace() -> None:
    named = named_in(
        "Checkout deadlocks\nTraceback (most recent call last):\n"
        '  File "/app/src/orders/locking.py", line 42, in acquire\n'
        "at com.shop.OrderLock.release(OrderLock.java:42)\n"
        "see C:\\work\\billing\\invoice.py"
    )
    assert "app/src/orders/locking.py" in named.paths
    assert "OrderLock.java" in named.paths
    assert "work/billing/invoice.py" in named.paths
    assert {"OrderLock.release", "release", "acquire"} <= named.symbols


def test_a_glob_matches_a_named_path_or_its_tail_only() -> None:
    named = Named(paths=("src/orders/locking.py",))
    assert match(named, ["orders/locking.py"], None) == "orders/locking.py"
    assert match(named, ["orders/**"], None) == "orders/** (src/orders/locking.py)"
    assert match(named, ["billing/**", "locking.ts"], None) is None
    assert match(Named(symbols=frozenset({"OrderLock.acquire"})), None, ["OrderLock.acquire"])
    assert match(Named(), ["**"], ["x"]) is None


def test_a_huge_ticket_is_read_in_bounded_time() -> None:
    # Every run possessive, the names capped: a pasted log cannot make the search crawl.
    named = named_in("a/" * 50_000 + "b.py " + "x.y " * 50_000)
    assert len(named.paths) + len(named.symbols) <= 200

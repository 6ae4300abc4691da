"""`add`/`edit --paths --symbols`, `show`, and `search --paths --explain` on the command line."""

from __future__ import annotations

import json

TEXT = "Release rows in id order inside one transaction"
TRACE = (
    "Checkout deadlocks when a payment is retried\n"
    '  File "/srv/app/src/orders/locking.py", line 88, in acquire'
)


def test_paths_and_symbols_are_added_shown_edited_and_cleared(cli) -> None:
    added = cli(
        "add",
        TEXT,
        "--learned-from",
        "SHOP-1",
        "--paths",
        "./orders/locking.py,orders//**",
        "--symbols",
        "OrderLock.acquire",
    )
    assert added.exit_code == 0, added.output
    lesson = added.stdout.strip()
    shown = cli("show", lesson).stdout
    assert "paths:        orders/locking.py, orders/**" in shown
    assert "symbols:      OrderLock.acquire" in shown
    detail = json.loads(cli("show", lesson, "--json").stdout)
    assert (detail["paths"], detail["symbols"]) == (
        ["orders/locking.py", "orders/**"],
        ["OrderLock.acquire"],
    )

    assert cli("edit", lesson, "--paths", "billing/**").stdout.strip() == f"{lesson} edited"
    assert json.loads(cli("show", lesson, "--json").stdout)["paths"] == ["billing/**"]
    assert cli("edit", lesson, "--paths", "", "--symbols", "").exit_code == 0
    cleared = json.loads(cli("show", lesson, "--json").stdout)
    assert (cleared["paths"], cleared["symbols"]) == (None, None)
    assert "paths:" not in cli("show", lesson).stdout
    history = json.loads(cli("history", lesson, "--json").stdout)
    assert [entry["action"] for entry in history] == ["create", "edit", "edit"]


def test_a_bad_anchor_is_one_line_naming_the_field(cli) -> None:
    for option, value, why in (
        ("--paths", "../etc/passwd", "paths: '../etc/passwd' has a '..' segment"),
        ("--paths", "/etc/passwd", "is absolute"),
        ("--symbols", "drop table", "symbols: 'drop table' is not a name"),
    ):
        result = cli("add", TEXT, "--learned-from", "SHOP-1", option, value)
        assert result.exit_code != 0
        assert why in result.stderr and "Traceback" not in result.output
        assert len(result.stderr.strip().splitlines()) == 1, result.stderr


def test_search_explains_why_an_anchored_lesson_ranks_first(cli) -> None:
    for n in range(6):  # a playbook of some size: in a tiny one every word is common
        cli("add", f"Unrelated lesson {n} about topic{n}", "--learned-from", "X-1")
    cli("add", "Payment retries in checkout can deadlock", "--learned-from", "SHOP-1")
    anchored = cli("add", TEXT, "--learned-from", "SHOP-2", "--paths", "orders/locking.py")
    lesson = anchored.stdout.strip()
    explained = cli("search", TRACE, "--explain").stdout
    first = next(line for line in explained.splitlines() if line.startswith(" 1 "))
    assert first.split()[1] == lesson
    assert "anchor x2: anchored to orders/locking.py named in the ticket" in explained

    plain = json.loads(
        cli("search", "Checkout deadlocks when a payment is retried", "--json").stdout
    )
    assert lesson not in [hit["id"] for hit in plain["results"]]
    named = json.loads(
        cli(
            "search",
            "Checkout deadlocks when a payment is retried",
            "--paths",
            "orders/locking.py",
            "--json",
        ).stdout
    )
    assert named["results"][0]["id"] == lesson
    assert named["results"][0]["anchor"] == "orders/locking.py"
    bad = cli("search", "deadlock", "--paths", "../x.py")
    assert bad.exit_code != 0 and "--paths:" in bad.stderr and "Traceback" not in bad.output

"""Each scope's active lessons against its context budget."""

from __future__ import annotations

from sqlalchemy import Engine

from playbook.consolidation.budget import ScopeSize, scope_sizes
from playbook.db import transaction
from playbook.lessons import lifecycle


def test_scope_sizes_count_active_lessons_only_fullest_first(engine: Engine) -> None:
    rows = [
        ("a" * 700 + " retry", "acme/api", "active"),
        ("b" * 300 + " lock", "acme/api", "active"),
        ("c" * 5000 + " gone", "acme/api", "proposed"),
        ("d" * 100 + " pin", "other/web", "active"),
    ]
    with transaction(engine) as session:
        for text, scope, status in rows:
            lifecycle.add(
                session, text, learned_from="T-1", scope=scope, status=status, actor="t",
                max_chars=6000,
            )  # fmt: skip
        lifecycle.archive(session, "pb-2", reason="old", actor="t")
        lifecycle.add(session, "e" * 50 + " cache", learned_from="T-2", scope="g", actor="t")
        budgets = {"acme/api": 800, "other/web": 8000, "g": 100}
        sizes = scope_sizes(session, lambda scope: budgets[scope])
    assert sizes == [
        ScopeSize("acme/api", 1, 706, 800),
        ScopeSize("g", 1, 56, 100),
        ScopeSize("other/web", 1, 104, 8000),
    ]
    assert [s.over for s in sizes] == [True, False, False]
    assert round(sizes[0].share, 3) == 0.882
    assert ScopeSize("x", 1, 75, 100).over and not ScopeSize("x", 1, 74, 100).over

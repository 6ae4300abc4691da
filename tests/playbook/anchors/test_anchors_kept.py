"""Anchors are set and edited with a revision, undone by a revert, and survive export/import."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import Engine

from playbook.db import transaction
from playbook.lessons import lifecycle
from playbook.lessons.fields import FieldProblem
from playbook.transfer import export, imports, reports
from tests.playbook.transfer.test_io import empty, lines_and_fields, refused, snapshot

TEXT = "Take the order lock before the payment lock, never the other way round"


def anchors(engine: Engine, bullet_id: str) -> tuple[list[str] | None, list[str] | None]:
    with transaction(engine) as session:
        bullet = lifecycle.get(session, bullet_id)
        return bullet.paths, bullet.symbols


def test_added_and_edited_anchors_are_kept_in_the_history(engine: Engine) -> None:
    with transaction(engine) as session:
        lesson = lifecycle.add(
            session,
            TEXT,
            learned_from="SHOP-1",
            actor="alice",
            paths="./orders/locking.py, orders/locking.py",
            symbols=["OrderLock.acquire"],
        ).bullet
    assert anchors(engine, lesson.id) == (["orders/locking.py"], ["OrderLock.acquire"])
    with transaction(engine) as session:
        change = lifecycle.edit(session, lesson.id, actor="bob", paths=["orders/**"])
        assert change.revision is not None
        assert change.revision.before["paths"] == ["orders/locking.py"]
        assert change.revision.after["paths"] == ["orders/**"]
        assert change.revision.after["symbols"] == ["OrderLock.acquire"]  # left as it was
        cleared = lifecycle.edit(session, lesson.id, actor="bob", paths="", symbols=[])
        assert cleared.revision is not None and cleared.revision.after["paths"] is None
        edited_id = change.revision.id
    assert anchors(engine, lesson.id) == (None, None)
    with transaction(engine) as session:
        # Undoing the clear puts back the anchors the edit had set.
        history = lifecycle.history(session, lesson.id)
        lifecycle.revert(session, lesson.id, history[-1].id, actor="carol")
    assert anchors(engine, lesson.id) == (["orders/**"], ["OrderLock.acquire"])
    with transaction(engine) as session:
        lifecycle.revert(session, lesson.id, edited_id, actor="carol")
    assert anchors(engine, lesson.id) == (["orders/locking.py"], ["OrderLock.acquire"])


def test_a_bad_anchor_is_refused_and_nothing_changes(engine: Engine) -> None:
    with transaction(engine) as session:
        lesson = lifecycle.add(session, TEXT, learned_from="SHOP-1", actor="a", paths="a.py")
    with pytest.raises(FieldProblem) as caught, transaction(engine) as session:
        lifecycle.edit(session, lesson.bullet.id, actor="b", paths="../../etc/passwd")
    assert caught.value.field == "paths"
    with pytest.raises(FieldProblem) as caught, transaction(engine) as session:
        lifecycle.add(session, "Another", learned_from="SHOP-2", actor="a", symbols="not a name")
    assert caught.value.field == "symbols"
    assert anchors(engine, lesson.bullet.id) == (["a.py"], None)


@pytest.mark.parametrize("fmt", ["yaml", "jsonl", "csv"])
def test_anchors_round_trip_through_export_and_import(
    engine: Engine, fmt: str, tmp_path: Path
) -> None:
    with transaction(engine) as session:
        lifecycle.add(
            session,
            TEXT,
            learned_from="SHOP-1",
            actor="a",
            paths=["orders/locking.py", "src/*.ts"],
            symbols=["OrderLock.acquire", "release"],
        )
        lifecycle.add(session, "Unanchored lesson about release notes", learned_from="S", actor="a")
    before = snapshot(engine)
    with transaction(engine) as session:
        text = export.export_bullets(session, fmt)  # type: ignore[arg-type]
    empty(engine)
    path = tmp_path / f"playbook.{fmt}"
    path.write_text(text)
    with transaction(engine) as session:
        assert imports.import_file(session, path, actor="restore").created == 2
    assert snapshot(engine) == before
    assert anchors(engine, "pb-1") == (
        ["orders/locking.py", "src/*.ts"],
        ["OrderLock.acquire", "release"],
    )
    assert anchors(engine, "pb-2") == (None, None)


def test_a_bulk_import_checks_anchors_line_by_line(engine: Engine, tmp_path: Path) -> None:
    path = tmp_path / "p.yaml"
    path.write_text(
        "- text: Fine\n  learned_from: A-1\n  paths: [orders/**]\n"
        "- text: Escapes the repository\n  learned_from: A-2\n  paths: [../etc/passwd]\n"
        "- text: Bad name\n  learned_from: A-3\n  symbols: 12\n"
    )
    refusal: reports.ImportRefused = refused(engine, path)
    assert lines_and_fields(refusal) == [(6, "paths"), (9, "symbols")]

"""Which flagged lessons wait for a maintainer: the active ones, in `stale`, the API and stats."""

from __future__ import annotations

from sqlalchemy import Engine

from playbook.anchors import digest, stale
from playbook.db import transaction
from playbook.lessons import lifecycle


def test_an_archived_lesson_keeps_its_flag_unlisted_and_a_restore_lists_it_again(
    engine: Engine,
) -> None:
    with transaction(engine) as session:
        added = lifecycle.add(session, "Lock orders rows", learned_from="T-1", actor="t")
        added.bullet.paths = ["orders/**"]
        added.bullet.scope = "acme/api"
        session.flush()
        lesson = added.bullet.id
        changes = [stale.FileChange("modified", "orders/a.py")]
        assert stale.flag(session, "acme/api", "acme/api#3", changes, actor="bot")
        assert [row["id"] for row in stale.flagged(session)] == [lesson]
        assert digest.stale_report(session)["flagged"] == 1

        lifecycle.archive(session, lesson, actor="prune", reason="nobody loaded it")
        assert stale.flagged(session) == []
        assert digest.stale_report(session)["flagged"] == 0

        lifecycle.restore(session, lesson, actor="maintainer")
        [row] = stale.flagged(session)
        assert row["stale_detail"] == "acme/api#3 modified orders/a.py"

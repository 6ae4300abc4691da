"""`playbook-bot stale`: the flagged lessons listed, cleared, and confirmed by a deprecation."""

from __future__ import annotations

import json

from sqlalchemy import Engine

from playbook.anchors.stale import FileChange, flag
from playbook.db import transaction
from playbook.lessons import lifecycle

REPO = "acme/api"


def _flagged(engine: Engine, text: str, paths: list[str], changes: list[FileChange]) -> str:
    with transaction(engine) as session:
        added = lifecycle.add(session, text, learned_from="API-1", actor="t", scope=REPO)
        added.bullet.paths = paths
        session.flush()
        flag(session, REPO, f"{REPO}#12", changes, actor="bot")
        return added.bullet.id


def test_list_clear_and_confirm(cli, engine: Engine) -> None:
    assert cli("stale").stderr.strip() == "no lesson is flagged"
    gone = _flagged(
        engine,
        "Take the row lock before the stock check",
        ["orders/locking.py"],
        [FileChange("removed", "orders/locking.py")],
    )
    moved = _flagged(
        engine,
        "Keep the order state machine pure",
        ["orders/a.py"],
        [FileChange("renamed", "orders/b.py", "orders/a.py")],
    )
    listed = cli("stale")
    assert listed.exit_code == 0, listed.output
    assert f"{REPO}#12 removed every file it is about (deleted orders/locking.py)" in listed.stdout
    assert "(left out of AGENTS.md until looked at)" in listed.stdout
    assert f"{REPO}#12 renamed orders/a.py -> orders/b.py" in listed.stdout
    rows = json.loads(cli("stale", "--json").stdout)
    assert [row["id"] for row in rows] == [gone, moved]
    assert rows[1]["paths"] == ["orders/b.py"] and rows[0]["files_gone"] is True
    assert rows[0]["stale_pr"] == f"{REPO}#12"

    cleared = cli("stale", "--clear", moved, "--reason", "the rename changed nothing")
    assert cleared.exit_code == 0 and cleared.stdout.strip() == f"{moved}: stale flag cleared"
    again = cli("stale", "--clear", moved)
    assert again.stderr.strip() == f"{moved} is not flagged; nothing changed"
    history = cli("history", moved).stdout
    assert f"the rename changed nothing; stale flag cleared ({REPO}#12)" in history
    assert "flag_stale" in history

    done = cli("deprecate", gone, "--reason", "the lock is gone with the file")
    assert done.exit_code == 0, done.output
    assert cli("stale").stderr.strip() == "no lesson is flagged"
    assert f"stale flag cleared ({REPO}#12)" in cli("history", gone).stdout


def test_a_bad_clear_is_one_line(cli) -> None:
    unknown = cli("stale", "--clear", "pb-999")
    assert (
        unknown.exit_code != 0
        and "pb-999" in unknown.stderr
        and len(unknown.stderr.splitlines()) == 1
    )
    lone = cli("stale", "--reason", "why")
    assert lone.exit_code != 0 and "--reason goes with --clear ID" in lone.stderr

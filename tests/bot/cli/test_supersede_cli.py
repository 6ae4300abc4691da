"""`playbook-bot supersede`, and what show, history, list, search, restore and add say of it."""

from __future__ import annotations

import json

from sqlalchemy import Engine

from playbook.db import transaction
from playbook.lessons import lifecycle
from tests.support import saw

OLD = "Pin the v1 payments client to 1.4 because 1.5 breaks refunds"
NEW = "Use the v2 payments client because it handles refunds and retries"
SIMILAR = "Pin the v2 payments client to 2.0 because 1.5 breaks refunds and retries"


def _add(cli, text: str, ticket: str) -> str:
    result = cli("add", text, "--learned-from", ticket)
    assert result.exit_code == 0, result.output
    return result.stdout.strip()


def test_supersede_show_history_and_restore(cli) -> None:
    old, new = _add(cli, OLD, "PAY-1"), _add(cli, NEW, "PAY-2")
    done = cli("supersede", old, "--by", new, "--reason", "v2 fixes refunds")
    assert done.exit_code == 0 and done.stdout.strip() == f"{old} superseded by {new}"
    again = cli("supersede", old, "--by", new)
    assert again.stdout.strip() == f"{old} is already superseded by {new}; nothing changed"

    shown = cli("show", old).stdout
    assert "[superseded]" in shown and f"superseded by {new}" in shown
    assert f"supersedes:   {old}" in cli("show", new).stdout
    as_json = json.loads(cli("show", new, "--json").stdout)
    assert as_json["supersedes"] == [old] and as_json["superseded_by"] is None
    assert json.loads(cli("show", old, "--json").stdout)["superseded_by"] == new
    assert (
        f"supersede  by tester: superseded by {new}: v2 fixes refunds" in cli("history", old).stdout
    )
    assert f"replace    by tester: supersedes {old}: v2 fixes refunds" in cli("history", new).stdout
    listed = json.loads(cli("list", "--status", "superseded", "--json").stdout)
    assert [(row["id"], row["superseded_by"]) for row in listed] == [(old, new)]
    searched = json.loads(cli("search", "payments client refunds", "--json").stdout)
    assert [hit["id"] for hit in searched["results"]] == [new]

    restored = cli("restore", old)
    assert restored.stdout.strip() == f"{old} restored"
    assert "superseded" not in cli("show", old).stdout.split("\n")[0]
    assert "supersedes:" not in cli("show", new).stdout  # its history still tells it


def test_supersede_refuses_in_one_line(cli) -> None:
    old, new = _add(cli, OLD, "PAY-1"), _add(cli, NEW, "PAY-2")
    for args, expected in (
        ((old, "--by", old), "cannot supersede itself"),
        ((old, "--by", "pb-99"), "no bullet with id 'pb-99'"),
        (("pb-99", "--by", new), "no bullet with id 'pb-99'"),
        ((old, "--by", "pb 2"), "by:"),
    ):
        result = cli("supersede", *args)
        assert result.exit_code != 0, args
        assert expected in result.stderr and "Traceback" not in result.output
        assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert cli("supersede", old, "--by", new).exit_code == 0
    cycle = cli("supersede", new, "--by", old)
    assert cycle.exit_code != 0 and "cycle" in cycle.stderr
    missing = cli("supersede", old)
    assert missing.exit_code == 2 and "--by" in missing.stderr


def test_add_suggests_superseding_a_similar_lesson(cli) -> None:
    old = _add(cli, OLD, "PAY-1")
    added = cli("add", SIMILAR, "--learned-from", "PAY-3")
    new = added.stdout.strip()
    assert added.exit_code == 0 and new != old
    assert f"much like {old}" in added.stderr
    assert f"playbook-bot supersede {old} --by {new}" in added.stderr
    unrelated = cli("add", "Vendor the chart library", "--learned-from", "W-1")
    assert unrelated.exit_code == 0 and "supersede" not in unrelated.stderr
    duplicate = cli("add", OLD + " today", "--learned-from", "PAY-4")
    assert duplicate.stdout.strip() == old
    assert "already says this" in duplicate.stderr and "supersede" not in duplicate.stderr


def test_cli_cites_of_a_superseded_lesson_follow_the_setting(
    cli, engine: Engine, monkeypatch
) -> None:
    old, new = _add(cli, OLD, "PAY-1"), _add(cli, NEW, "PAY-2")
    cli("supersede", old, "--by", new)
    saw(engine, "PAY-7", "PAY-8")
    assert cli("usage", "record", "cited", "--ids", old, "--ticket", "PAY-7").exit_code == 0
    monkeypatch.setenv("PLAYBOOK_SUPERSEDED_CITES_COUNT_FOR_REPLACEMENT", "1")
    assert cli("usage", "record", "cited", "--ids", old, "--ticket", "PAY-8").exit_code == 0
    with transaction(engine) as session:
        assert lifecycle.get(session, old).cites == 2
        assert lifecycle.get(session, new).cites == 1

"""`consolidate` and `consolidations` without a model: which scopes are consolidated, what is
proposed, and a maintainer's accept (edited), reject and undo through the CLI."""

from __future__ import annotations

import json
from typing import Any

import pytest
from sqlalchemy import Engine

from tests.bot.consolidation_world import (
    FILLER,
    JITTER,
    LINT,
    LINT_AGAIN,
    MERGED,
    RECONNECT,
    SCOPE,
    SCOPE_CHARS,
    WEB,
    add,
    merge_jobs,
    proposals,
    seed,
    status_of,
)


@pytest.fixture
def tight(monkeypatch: pytest.MonkeyPatch) -> None:
    """A 2,000-character budget: the seeded scope fills 86% of it."""
    monkeypatch.setenv("PLAYBOOK_CONTEXT_BUDGET", "2000")


def ok(result: Any) -> str:
    assert result.exit_code == 0, result.output
    return result.output


def test_a_dry_run_shows_the_proposal_and_stores_nothing(
    cli: Any, engine: Engine, tight: None
) -> None:
    seed(engine)
    out = ok(cli("consolidate", "--dry-run"))
    share = round(100 * SCOPE_CHARS / 2000)
    assert f"{SCOPE}: {SCOPE_CHARS:,} / 2,000 chars ({share}%), 11 lessons" in out
    saves = len(JITTER)  # the draft is the longer member, so the shorter one is saved
    assert f"(not stored) pb-1 + pb-2: saves {saves} chars, draft longest member" in out
    assert "would propose 1" in out and "dry run: nothing was stored" in out
    dry = json.loads(ok(cli("consolidate", "--dry-run", "--json")))
    [proposal] = dry["scopes"][0]["proposals"]
    assert (dry["dry_run"], proposal["id"], proposal["draft"]) == (True, None, RECONNECT)
    assert proposal["members"] == [
        {"id": "pb-1", "text": RECONNECT},
        {"id": "pb-2", "text": JITTER},
    ]
    assert proposals(engine) == []
    assert "no consolidation proposals" in ok(cli("consolidations", "list"))


def test_without_a_model_the_proposal_carries_the_longest_member_as_its_draft(
    cli: Any, engine: Engine, tight: None
) -> None:
    seed(engine)
    out = ok(cli("consolidate"))
    [proposal] = proposals(engine)
    number = proposal["id"]
    assert f"#{number} pb-1 + pb-2: saves" in out and "merge job" not in out
    assert proposal["member_ids"] == ["pb-1", "pb-2"]
    assert (proposal["draft"], proposal["draft_source"]) == (RECONNECT, "longest")
    # The shorter member's own words the draft lacks are flagged for the reviewer.
    assert "jitter" in proposal["dropped_terms"]["pb-2"]
    assert merge_jobs(engine) == []  # no model: nothing queued for one
    # Run again: the same group is open already, so nothing new.
    again = json.loads(ok(cli("consolidate", "--json")))
    [scope] = again["scopes"]
    assert (scope["groups"], scope["proposals"], scope["already_proposed"]) == (1, [], 1)
    assert len(proposals(engine)) == 1
    shown = ok(cli("consolidations", "show", str(number)))
    assert f"consolidation #{number}: open in acme/api" in shown
    assert "[pb-1]" in shown and "[pb-2]" in shown and "[draft]" in shown
    assert "key terms of a member the draft drops" in shown and "pb-2: " in shown
    listed = ok(cli("consolidations", "list", "--status", "open"))
    assert listed.startswith(f"open      acme/api  #{number} pb-1 + pb-2")


def test_a_scope_under_its_budget_is_left_alone_unless_named(cli: Any, engine: Engine) -> None:
    seed(engine)
    out = ok(cli("consolidate"))  # the default 8,000 characters: 21%
    assert f"{SCOPE}: {SCOPE_CHARS:,} / 8,000 chars (21%)" in out
    assert "under 75% of its budget, skipped" in out
    assert proposals(engine) == []
    named = ok(cli("consolidate", "--scope", SCOPE))
    assert "proposed 1" in named and len(proposals(engine)) == 1
    nobody = ok(cli("consolidate", "--scope", "nobody/here"))
    assert nobody.strip() == (
        "nobody/here: 0 / 8,000 chars (0%), 0 lessons: fewer than two active lessons, skipped"
    )


def test_accept_with_an_edited_text_then_undo(cli: Any, engine: Engine, tight: None) -> None:
    seed(engine)
    ok(cli("consolidate"))
    number = str(proposals(engine)[0]["id"])
    out = ok(cli("consolidations", "accept", number, "--text", MERGED, "--reason", "same rule"))
    merged = f"pb-{len(FILLER) + 3}"
    assert out.strip() == (
        f"consolidation #{number} accepted: {merged} is active and supersedes pb-1, pb-2"
    )
    shown = json.loads(ok(cli("consolidations", "show", number, "--json")))
    assert (shown["status"], shown["merged_id"], shown["draft_source"]) == (
        "accepted",
        merged,
        "edited",
    )
    assert (shown["decided_by"], shown["reason"]) == ("tester", "same rule")
    lesson = json.loads(ok(cli("show", merged, "--json")))
    assert (lesson["text"], lesson["status"], lesson["scope"]) == (MERGED, "active", SCOPE)
    assert status_of(engine, "pb-1") == status_of(engine, "pb-2") == "superseded"
    # The scope is smaller now by what the merge saved.
    stats = json.loads(ok(cli("stats", "--json")))
    [size] = [s for s in stats["scopes"] if s["scope"] == SCOPE]
    assert size["chars"] == SCOPE_CHARS - len(RECONNECT) - len(JITTER) + len(MERGED)

    undone = ok(cli("consolidations", "undo", number, "--reason", "too broad"))
    assert undone.strip() == (
        f"consolidation #{number} undone: pb-1, pb-2 active again, {merged} archived"
    )
    assert status_of(engine, "pb-1") == status_of(engine, "pb-2") == "active"
    assert status_of(engine, merged) == "archived"
    # Undone: the same members are not proposed again.
    assert "already proposed, rejected or undone" in ok(cli("consolidate"))
    assert len(proposals(engine)) == 1


def test_accept_reads_the_text_from_a_file_and_reject_keeps_the_group_out(
    cli: Any, engine: Engine, tmp_path: Any
) -> None:
    add(engine, WEB, LINT, LINT_AGAIN)
    add(engine, "acme/docs", "Write ADRs in docs/adr with the next free number", "Link the ADR")
    ok(cli("consolidate", "--scope", WEB))
    first = proposals(engine)[0]["id"]
    rejected = ok(cli("consolidations", "reject", str(first), "--reason", "they differ on purpose"))
    assert rejected.strip() == f"consolidation #{first} rejected"
    assert status_of(engine, "pb-1") == status_of(engine, "pb-2") == "active"
    again = ok(cli("consolidate", "--scope", WEB))
    assert "1 already proposed, rejected or undone, proposed 0" in again
    listed = json.loads(ok(cli("consolidations", "list", "--status", "rejected", "--json")))
    assert [(c["id"], c["reason"], c["decided_by"]) for c in listed] == [
        (first, "they differ on purpose", "tester")
    ]
    # A member changes: the group is proposed again, and accepted from a file.
    ok(cli("edit", "pb-2", "--text", LINT_AGAIN + ", then push"))
    ok(cli("consolidate", "--scope", WEB))
    text = tmp_path / "merged.txt"
    text.write_text("Before pushing, run the linter with --fix and commit what it formatted\n")
    second = proposals(engine)[-1]["id"]
    out = ok(cli("consolidations", "accept", str(second), "--text-file", str(text)))
    assert f"consolidation #{second} accepted: pb-5 is active and supersedes pb-1, pb-2" in out
    assert json.loads(ok(cli("show", "pb-5", "--json")))["text"] == (
        "Before pushing, run the linter with --fix and commit what it formatted"
    )


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (("show", "abc"), "consolidation id must be a positive number such as 3, not 'abc'"),
        (("accept", "0"), "consolidation id must be a positive number such as 3, not '0'"),
        (("reject", "9999999"), "no consolidation with id '9999999'"),
        (("undo", "{id}"), "consolidation {id} is open, not accepted, so it cannot be undone"),
        (("accept", "{id}", "--text", "x", "--text-file", "f"), "give --text or --text-file"),
        (("accept", "{id}", "--text-file", "no-such-file"), "--text-file no-such-file"),
        (("accept", "{id}", "--text", "   "), "text: is empty"),
        (("list", "--status", "merged"), "'merged' is not one of"),
    ],
)
def test_bad_input_is_one_line_naming_it(
    cli: Any, engine: Engine, args: tuple[str, ...], said: str
) -> None:
    add(engine, WEB, LINT, LINT_AGAIN)
    ok(cli("consolidate", "--scope", WEB))
    number = str(proposals(engine)[0]["id"])
    result = cli("consolidations", *(arg.replace("{id}", number) for arg in args))
    said = said.replace("{id}", number)
    assert result.exit_code != 0
    assert said in result.output and "Traceback" not in result.output
    assert len(result.output.strip().splitlines()) == 1, result.output
    assert proposals(engine)[0]["status"] == "open"


def test_a_decided_proposal_cannot_be_decided_again(cli: Any, engine: Engine) -> None:
    add(engine, WEB, LINT, LINT_AGAIN)
    ok(cli("consolidate", "--scope", WEB))
    number = proposals(engine)[0]["id"]
    ok(cli("consolidations", "reject", str(number)))
    again = cli("consolidations", "accept", str(number))
    assert again.exit_code != 0
    said = f"consolidation {number} is rejected, not open, so it cannot be accepted"
    assert said in again.output
    assert status_of(engine, "pb-1") == "active"

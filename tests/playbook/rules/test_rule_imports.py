"""Importing rule files: near-duplicates (stored and within the import), re-runs, status."""

from __future__ import annotations

import pytest
from sqlalchemy import Engine, func, select

from playbook.db import transaction
from playbook.lessons import lifecycle
from playbook.lessons.fields import FieldProblem
from playbook.models import Bullet, Revision
from playbook.rules import imports
from playbook.rules.imports import RuleSource
from playbook.rules.parse import Item, parse


def source(name: str, *texts: str, learned_from: str = "AGENTS.md@2026-11-02") -> RuleSource:
    items = [Item(text, ("style",), line) for line, text in enumerate(texts, start=1)]
    return RuleSource(name, items, learned_from, source_url=name)


def run(
    engine: Engine, *sources: RuleSource, max_chars: int = 2000, **options: str
) -> imports.Plan:
    with transaction(engine) as session:
        planned = imports.plan(session, sources, max_chars=max_chars, **options)
        return imports.apply(session, planned, actor="alice", max_chars=max_chars)


def count(engine: Engine) -> int:
    with transaction(engine) as session:
        return session.scalar(select(func.count()).select_from(Bullet)) or 0


def test_items_become_proposed_lessons_with_their_provenance(engine: Engine) -> None:
    done = run(engine, source("AGENTS.md", "Use uv to manage the virtual environment"))
    [entry] = done.entries
    assert (entry.outcome, entry.bullet_id) == ("add", "pb-1")
    with transaction(engine) as session:
        bullet = lifecycle.get(session, "pb-1")
        assert bullet.status == "proposed"
        assert (bullet.scope, bullet.source, bullet.source_url) == ("global", "rules", "AGENTS.md")
        assert bullet.learned_from == "AGENTS.md@2026-11-02"
        assert bullet.tags == ["style"]
        revision = session.scalars(select(Revision)).one()
        assert (revision.actor, revision.reason) == ("alice", "imported from AGENTS.md")


def test_status_active_and_a_scope(engine: Engine) -> None:
    run(
        engine,
        source("CLAUDE.md", "Run the migrations before the worker"),
        scope="acme/api",
        status="active",
    )
    with transaction(engine) as session:
        bullet = lifecycle.get(session, "pb-1")
        assert (bullet.status, bullet.scope) == ("active", "acme/api")


@pytest.mark.parametrize(
    ("options", "field"),
    [({"status": "archived"}, "status"), ({"scope": ""}, "scope"), ({"scope": "x" * 201}, "scope")],
)
def test_a_bad_target_refuses_the_whole_import(engine: Engine, options, field: str) -> None:
    with pytest.raises(FieldProblem) as refused, transaction(engine) as session:
        imports.plan(
            session, [source("AGENTS.md", "Use uv to manage the virtual environment")], **options
        )
    assert refused.value.field == field
    assert count(engine) == 0


def test_near_duplicates_of_stored_lessons_are_reported_not_added(seeded: Engine) -> None:
    done = run(
        seeded,
        source(
            "AGENTS.md",
            "Retry the webhooks with an idempotency key",  # pb-1, active
            "Cache the search index between the requests",  # pb-5, proposed
            "Pin chromium in CI for screenshots",  # pb-3, but in scope acme/api
        ),
    )
    assert [(e.outcome, e.duplicate_of) for e in done.entries] == [
        ("duplicate", "pb-1"),
        ("duplicate", "pb-5"),
        ("add", None),
    ]
    assert done.entries[0].overlap >= lifecycle.DUPLICATE_OVERLAP
    assert done.entries[2].bullet_id == "pb-6"
    assert count(seeded) == 6


def test_near_duplicates_within_the_import_are_reported_with_their_first(engine: Engine) -> None:
    done = run(
        engine,
        source("AGENTS.md", "Never commit secrets to the repository", "Keep pull requests small"),
        source(
            "CLAUDE.md", "never commit the secrets to the repository!", "Keep pull requests small"
        ),
    )
    assert [(e.where, e.outcome, e.duplicate_of) for e in done.entries] == [
        ("AGENTS.md:1", "add", None),
        ("AGENTS.md:2", "add", None),
        ("CLAUDE.md:1", "repeat", "AGENTS.md:1"),
        ("CLAUDE.md:2", "repeat", "AGENTS.md:2"),
    ]
    assert count(engine) == 2


def test_running_the_same_import_again_adds_nothing(engine: Engine) -> None:
    data = (
        b"## Style\n\n- Format with ruff before every commit.\n"
        b"- Type-hint every public function.\n\n## Tests\n\nNever mock the database in tests.\n"
    )
    rules = RuleSource("AGENTS.md", parse(data, "agents").items, "AGENTS.md@2026-11-02")
    first = run(engine, rules)
    assert [e.outcome for e in first.entries] == ["add", "add", "add"]
    again = run(engine, rules)
    assert [(e.outcome, e.duplicate_of) for e in again.entries] == [
        ("duplicate", "pb-1"),
        ("duplicate", "pb-2"),
        ("duplicate", "pb-3"),
    ]
    assert count(engine) == 3


def test_a_lesson_the_scope_retired_is_not_proposed_again(engine: Engine) -> None:
    run(engine, source("AGENTS.md", "Squash commits before merging"))
    with transaction(engine) as session:
        lifecycle.archive(session, "pb-1", actor="bob", reason="we merge commits")
    done = run(engine, source("AGENTS.md", "Squash commits before merging"))
    assert [(e.outcome, e.duplicate_of) for e in done.entries] == [("retired", "pb-1")]
    assert count(engine) == 1


def test_an_item_failing_a_check_is_skipped_and_the_rest_added(engine: Engine) -> None:
    done = run(
        engine,
        source("AGENTS.md", "Use uv to manage the virtual environment", "x" * 30 + "\u202e" * 3),
        source("CLAUDE.md", "Document every environment variable", learned_from=""),
        max_chars=35,
    )
    assert [(e.outcome, e.problem) for e in done.entries] == [
        (
            "invalid",
            "text: is 40 characters long, over the 35 allowed"
            " (PLAYBOOK_MAX_LESSON_CHARS); shorten it or split it in two",
        ),
        ("add", None),
        (
            "invalid",
            "learned_from: is empty; name the ticket the lesson was learned from, e.g. CTMS-4337",
        ),
    ]
    assert count(engine) == 1


def test_a_plan_writes_nothing(engine: Engine) -> None:
    with transaction(engine) as session:
        planned = imports.plan(session, [source("AGENTS.md", "Use uv to manage the environment")])
    assert [e.outcome for e in planned.entries] == ["add"]
    assert count(engine) == 0


def test_a_lesson_written_between_plan_and_apply_turns_an_add_into_a_duplicate(
    engine: Engine,
) -> None:
    with transaction(engine) as session:
        planned = imports.plan(session, [source("AGENTS.md", "Use uv to manage the environment")])
    with transaction(engine) as session:
        lifecycle.add(session, "use uv to manage the environment", learned_from="CTMS-1", actor="b")
    with transaction(engine) as session:
        done = imports.apply(session, planned, actor="alice")
    assert [(e.outcome, e.duplicate_of, e.bullet_id) for e in done.entries] == [
        ("duplicate", "pb-1", None)
    ]
    assert count(engine) == 1


def test_parsed_files_import_in_order_with_their_tags(engine: Engine) -> None:
    data = (
        b"# Rules\n\n## Style\n\n- Wrap lines at 100 characters.\n- Wrap lines at 100 characters!\n"
    )
    rules = RuleSource("CLAUDE.md", parse(data, "claude").items, "CLAUDE.md@2026-11-02")
    done = run(engine, rules)
    assert [(e.where, e.outcome, e.duplicate_of) for e in done.entries] == [
        ("CLAUDE.md:5", "add", None),
        ("CLAUDE.md:6", "repeat", "CLAUDE.md:5"),
    ]
    with transaction(engine) as session:
        assert lifecycle.get(session, "pb-1").tags == ["style"]

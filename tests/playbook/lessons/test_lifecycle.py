"""The bullet lifecycle: ids, dedup, status changes, revisions, undo and time travel."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import Engine, func, select

from playbook import clock
from playbook.db import transaction
from playbook.errors import BulletNotFound, InvalidInput, InvalidTransition
from playbook.lessons import bulk, fields, lifecycle
from playbook.lessons.fields import FieldProblem
from playbook.models import Bullet, Revision
from playbook.version import playbook_version

T0 = datetime(2026, 11, 3, 9, 0, tzinfo=UTC)


def add(engine: Engine, text: str, **kwargs: object) -> lifecycle.AddResult:
    kwargs.setdefault("learned_from", "CTMS-1")
    kwargs.setdefault("actor", "alice")
    with transaction(engine) as session:
        return lifecycle.add(session, text, **kwargs)  # type: ignore[arg-type]


def test_new_bullets_get_sequential_pb_ids(engine: Engine) -> None:
    first = add(engine, "Retry payment webhooks with an idempotency key")
    second = add(engine, "Never hold a database row lock across an HTTP call")
    assert (first.bullet.id, second.bullet.id) == ("pb-1", "pb-2")
    assert first.created and second.created
    with transaction(engine) as session:
        bullet = lifecycle.get(session, "pb-2")
        assert bullet.status == "active"
        assert bullet.learned_from == "CTMS-1"
        assert bullet.created_at == bullet.updated_at


def test_add_stores_every_given_field(engine: Engine) -> None:
    add(
        engine,
        "Pin the Stripe API version in the client",
        learned_from="acme/shop#12",
        tags=" payments, stripe ,payments,",
        scope="acme/shop",
        section="error_resolution",
        status="proposed",
        source="pr_body",
        source_url="https://github.com/acme/shop/pull/14",
    )
    with transaction(engine) as session:
        bullet = lifecycle.get(session, "pb-1")
        assert bullet.tags == ["payments", "stripe"]
        assert (bullet.scope, bullet.section, bullet.status) == (
            "acme/shop",
            "error_resolution",
            "proposed",
        )
        assert bullet.source == "pr_body"
        assert bullet.source_url == "https://github.com/acme/shop/pull/14"


def test_near_duplicate_in_same_scope_reports_existing_id(engine: Engine) -> None:
    add(engine, "Use an idempotency key when retrying the payment webhook")
    again = add(
        engine, "use an idempotency key when retrying the payment webhook!", learned_from="X-9"
    )
    assert not again.created
    assert again.bullet.id == "pb-1"
    assert again.overlap >= 0.8
    with transaction(engine) as session:
        assert session.scalar(select(func.count()).select_from(Bullet)) == 1


def test_similar_text_in_other_scope_or_below_threshold_is_a_new_bullet(engine: Engine) -> None:
    add(engine, "Use an idempotency key when retrying the payment webhook")
    other_scope = add(
        engine, "Use an idempotency key when retrying the payment webhook", scope="acme/shop"
    )
    different = add(engine, "Use an idempotency key for refunds, never for captures")
    assert other_scope.created and different.created


def test_deprecated_bullet_does_not_block_a_new_one(engine: Engine) -> None:
    add(engine, "Restart the broker after changing its config")
    with transaction(engine) as session:
        lifecycle.deprecate(session, "pb-1", reason="wrong", actor="bob")
    assert add(engine, "Restart the broker after changing its config").created


@pytest.mark.parametrize("text", ["", "   \n "])
def test_empty_text_is_refused(engine: Engine, text: str) -> None:
    with pytest.raises(InvalidInput, match="needs some text"):
        add(engine, text)


def test_deprecate_records_when_and_why_and_restore_clears_it(engine: Engine) -> None:
    add(engine, "Bump the lock timeout when tests flake")
    with clock.frozen(T0), transaction(engine) as session:
        change = lifecycle.deprecate(session, "pb-1", reason="pr_closed_unmerged", actor="bot")
        assert change.changed
    with transaction(engine) as session:
        bullet = lifecycle.get(session, "pb-1")
        assert bullet.status == "deprecated"
        assert bullet.demoted_on == T0
        assert bullet.demoted_reason == "pr_closed_unmerged"
    with clock.frozen(T0 + timedelta(days=1)), transaction(engine) as session:
        lifecycle.restore(session, "pb-1", actor="carol", reason="it was right after all")
    with transaction(engine) as session:
        bullet = lifecycle.get(session, "pb-1")
        assert (bullet.status, bullet.demoted_on, bullet.demoted_reason) == ("active", None, None)
        actions = [(r.action, r.actor, r.reason) for r in lifecycle.history(session, "pb-1")]
    assert actions == [
        ("create", "alice", None),
        ("deprecate", "bot", "pr_closed_unmerged"),
        ("restore", "carol", "it was right after all"),
    ]


def test_repeating_a_status_change_records_nothing(engine: Engine) -> None:
    add(engine, "Bump the lock timeout when tests flake")
    with transaction(engine) as session:
        assert lifecycle.deprecate(session, "pb-1", reason="stale", actor="bot").changed
        assert not lifecycle.deprecate(session, "pb-1", reason="stale", actor="bot").changed
        assert lifecycle.restore(session, "pb-1", actor="x").changed
        assert not lifecycle.restore(session, "pb-1", actor="x").changed
    with transaction(engine) as session:
        assert len(lifecycle.history(session, "pb-1")) == 3


def test_transitions_that_make_no_sense_are_refused(engine: Engine) -> None:
    add(engine, "Proposed lesson from a PR body", status="proposed")
    add(engine, "Another lesson that gets archived")
    with transaction(engine) as session:
        with pytest.raises(InvalidTransition, match="use `approve`"):
            lifecycle.restore(session, "pb-1", actor="x")
        lifecycle.archive(session, "pb-2", reason="unused_30d", actor="prune")
        with pytest.raises(InvalidTransition, match="archived"):
            lifecycle.deprecate(session, "pb-2", reason="x", actor="x")
        with pytest.raises(InvalidTransition, match="not proposed"):
            lifecycle.approve(session, "pb-2", actor="x")
        with pytest.raises(InvalidInput, match="needs a reason"):
            lifecycle.deprecate(session, "pb-1", reason=" ", actor="x")


def test_approve_activates_a_proposed_bullet(engine: Engine) -> None:
    add(engine, "Proposed lesson from a PR body", status="proposed")
    with transaction(engine) as session:
        assert lifecycle.approve(session, "pb-1", actor="maintainer").changed
        assert lifecycle.get(session, "pb-1").status == "active"


def test_archive_and_restore_round_trip(engine: Engine) -> None:
    add(engine, "Rarely useful lesson")
    with transaction(engine) as session:
        lifecycle.archive(session, "pb-1", reason="unused_30d", actor="prune")
        assert lifecycle.get(session, "pb-1").demoted_reason == "unused_30d"
        lifecycle.restore(session, "pb-1", actor="carol")
        assert lifecycle.get(session, "pb-1").status == "active"


def test_unknown_id_raises_not_found(engine: Engine) -> None:
    with transaction(engine) as session, pytest.raises(BulletNotFound, match="pb-404"):
        lifecycle.deprecate(session, "pb-404", reason="x", actor="x")


def test_edit_writes_before_and_after(engine: Engine) -> None:
    add(engine, "Old wording", tags="a")
    with transaction(engine) as session:
        change = lifecycle.edit(
            session, "pb-1", actor="dave", reason="clearer", text="New wording", tags="a,b"
        )
        assert change.revision is not None
        assert change.revision.before["text"] == "Old wording"
        assert change.revision.after["text"] == "New wording"
        assert change.revision.after["tags"] == ["a", "b"]
        assert not lifecycle.edit(session, "pb-1", actor="dave", text="New wording").changed
        with pytest.raises(InvalidInput, match="cannot edit status"):
            lifecycle.edit(session, "pb-1", actor="dave", status="archived")


def test_revert_undoes_an_edit_and_a_deprecation(engine: Engine) -> None:
    add(engine, "Original text")
    with transaction(engine) as session:
        edit = lifecycle.edit(session, "pb-1", actor="dave", text="Vandalised text").revision
        deprecation = lifecycle.deprecate(session, "pb-1", reason="oops", actor="dave").revision
        assert edit is not None and deprecation is not None
        lifecycle.revert(session, "pb-1", deprecation.id, actor="erin")
        lifecycle.revert(session, "pb-1", edit.id, actor="erin")
    with transaction(engine) as session:
        bullet = lifecycle.get(session, "pb-1")
        assert (bullet.text, bullet.status, bullet.demoted_reason) == (
            "Original text",
            "active",
            None,
        )
        last = lifecycle.history(session, "pb-1")[-1]
        assert (last.action, last.actor) == ("revert", "erin")
        assert "undo revision" in (last.reason or "")


def test_reverting_a_creation_archives_instead_of_deleting(engine: Engine) -> None:
    add(engine, "Added by mistake")
    with transaction(engine) as session:
        created = lifecycle.history(session, "pb-1")[0]
        lifecycle.revert(session, "pb-1", created.id, actor="erin")
        assert lifecycle.get(session, "pb-1").status == "archived"
        with pytest.raises(InvalidInput, match="no revision 999"):
            lifecycle.revert(session, "pb-1", 999, actor="erin")


def test_as_of_answers_what_the_playbook_said_then(engine: Engine) -> None:
    with clock.frozen(T0):
        add(engine, "First wording")
    with clock.frozen(T0 + timedelta(days=2)), transaction(engine) as session:
        lifecycle.edit(session, "pb-1", actor="dave", text="Second wording")
    with clock.frozen(T0 + timedelta(days=3)), transaction(engine) as session:
        lifecycle.deprecate(session, "pb-1", reason="stale", actor="bot")
    with clock.frozen(T0 + timedelta(days=3)):
        add(engine, "A later lesson")
    with transaction(engine) as session:
        assert lifecycle.as_of(session, T0 - timedelta(days=1)) == []
        day1 = lifecycle.as_of(session, T0 + timedelta(days=1))
        day2 = lifecycle.as_of(session, T0 + timedelta(days=2, hours=1))
        day4 = lifecycle.as_of(session, T0 + timedelta(days=4))
    assert [(b["id"], b["text"], b["status"]) for b in day1] == [
        ("pb-1", "First wording", "active")
    ]
    assert [(b["id"], b["text"]) for b in day2] == [("pb-1", "Second wording")]
    assert [(b["id"], b["status"]) for b in day4] == [("pb-1", "deprecated"), ("pb-2", "active")]


def test_every_change_bumps_the_playbook_version(engine: Engine) -> None:
    with transaction(engine) as session:
        start = playbook_version(session)
    add(engine, "A lesson")
    with transaction(engine) as session:
        lifecycle.deprecate(session, "pb-1", reason="x", actor="x")
        assert playbook_version(session) == start + 2
        # The bullet carries the version of its last change, so caches refresh just it.
        assert lifecycle.get(session, "pb-1").version == start + 2
        assert not lifecycle.deprecate(session, "pb-1", reason="x", actor="x").changed
        assert playbook_version(session) == start + 2


def test_nothing_is_ever_deleted(engine: Engine) -> None:
    add(engine, "Lesson one")
    with transaction(engine) as session:
        lifecycle.archive(session, "pb-1", reason="x", actor="x")
        lifecycle.restore(session, "pb-1", actor="x")
        lifecycle.deprecate(session, "pb-1", reason="y", actor="x")
        assert session.scalar(select(func.count()).select_from(Bullet)) == 1
        assert session.scalar(select(func.count()).select_from(Revision)) == 4


def stored(engine: Engine) -> tuple[int, int, int]:
    """Bullets, revisions and the playbook version."""
    with transaction(engine) as session:
        return (
            session.scalar(select(func.count()).select_from(Bullet)),
            session.scalar(select(func.count()).select_from(Revision)),
            playbook_version(session),
        )


@pytest.mark.parametrize(
    ("kwargs", "field", "why"),
    [
        ({"learned_from": ""}, "learned_from", "is empty; name the ticket"),
        ({"learned_from": "   "}, "learned_from", "is empty; name the ticket"),
        ({"learned_from": None}, "learned_from", "is missing; name the ticket"),
        ({"learned_from": "A" * 201}, "learned_from", "over the 200 allowed"),
        ({"scope": "x" * 201}, "scope", "over the 200 allowed"),
        ({"status": "deprecated"}, "status", "'deprecated' is not one of proposed, active"),
        ({"tags": [1, 2]}, "tags", "each tag must be text, not a number (1)"),
        ({"tags": "t" * 101}, "tags", "over the 100 allowed"),
        ({"source_url": "https://x/\x00"}, "source_url", "contains a NUL character"),
    ],
)
def test_add_refuses_a_bad_field_by_name_and_writes_nothing(
    engine: Engine, kwargs: dict, field: str, why: str
) -> None:
    before = stored(engine)
    with pytest.raises(FieldProblem) as caught:
        add(engine, "A perfectly good lesson", **kwargs)
    assert caught.value.field == field and why in str(caught.value)
    assert str(caught.value).startswith(f"{field}: ")
    assert stored(engine) == before


def test_lesson_length_limit_is_the_callers(engine: Engine) -> None:
    with pytest.raises(FieldProblem, match="text: is 100,000 characters long, over the 2,000"):
        add(engine, "x" * 100_000)
    with pytest.raises(FieldProblem, match="over the 50 allowed"):
        add(engine, "word " * 20, max_chars=50)
    assert add(engine, "y" * 2_500, max_chars=3_000).created
    assert stored(engine)[0] == 1


def test_edit_checks_the_new_values_and_changes_nothing_when_one_is_bad(engine: Engine) -> None:
    add(engine, "Keep this wording", learned_from="CTMS-7")
    for changes, field in [
        ({"learned_from": ""}, "learned_from"),
        ({"scope": " "}, "scope"),
        ({"text": "z" * 2_001}, "text"),
        ({"text": "fine", "tags": [["nested"]]}, "tags"),
    ]:
        with transaction(engine) as session, pytest.raises(FieldProblem) as caught:
            lifecycle.edit(session, "pb-1", actor="dave", **changes)
        assert caught.value.field == field
    with transaction(engine) as session:
        bullet = lifecycle.get(session, "pb-1")
        assert (bullet.text, bullet.learned_from, bullet.scope) == (
            "Keep this wording",
            "CTMS-7",
            "global",
        )
        assert len(lifecycle.history(session, "pb-1")) == 1
        # An empty source_url or tags means "clear it", not a mistake (here both were empty).
        assert (
            lifecycle.edit(session, "pb-1", actor="dave", tags="", source_url="").changed is False
        )
        assert lifecycle.edit(
            session, "pb-1", actor="dave", text="z" * 2_001, max_chars=3_000
        ).changed


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"id": 7, "text": "x"}, "id: must be text, not a number (7); quote it"),
        ({"id": "pb 7", "text": "x"}, "id: 'pb 7' has spaces or commas"),
        ({"id": "pb-1,pb-2", "text": "x"}, "has spaces or commas"),
        ({"id": "pb-1", "text": "x", "status": "bogus"}, "status: 'bogus' is not one of"),
        ({"id": "pb-1", "text": ["x"]}, "text: must be text, not a list"),
        ({"id": "pb-1", "text": "x", "created_at": "soon"}, "created_at: 'soon' is not a date"),
        ({"id": "pb-1", "text": "x", "created_at": True}, "created_at: must be a date"),
        ({"id": "pb-1"}, "text: is missing"),
        ({"text": "x"}, "id: is missing"),
    ],
)
def test_put_refuses_values_that_do_not_fit(engine: Engine, values: dict, message: str) -> None:
    before = stored(engine)
    with transaction(engine) as session, pytest.raises(FieldProblem, match=re.escape(message)):
        bulk.put(session, values, actor="import")
    assert stored(engine) == before


def test_put_many_writes_a_batch_with_one_revision_per_change(engine: Engine) -> None:
    add(engine, "Existing lesson")  # pb-1
    batch = [
        {"id": "pb-1", "text": "Existing lesson, reworded", "learned_from": "A-1"},
        {"id": "CTMS-L-1", "text": "Imported with its own id", "learned_from": "A-2"},
        {"text": "Imported without an id", "learned_from": "A-3", "status": "deprecated"},
        {"id": "pb-007", "text": "Not the same id as pb-7", "learned_from": "A-4"},
    ]
    with transaction(engine) as session:
        held = lifecycle.get(session, "pb-1")  # an object the session already holds
        done = bulk.put_many(session, batch, actor="import", numbers_above=9)
        assert [(p.id, p.outcome) for p in done] == [
            ("pb-1", "updated"),
            ("CTMS-L-1", "created"),
            ("pb-10", "created"),  # above the pb-9 the rest of the file names
            ("pb-007", "created"),
        ]
        assert held.text == "Existing lesson, reworded"  # not a stale copy
        assert lifecycle.get(session, "pb-10").status == "deprecated"
        assert (
            lifecycle.add(session, "Next one", learned_from="A-5", actor="t").bullet.id == "pb-11"
        )
    assert stored(engine)[:2] == (5, 1 + 4 + 1)
    with transaction(engine) as session:
        again = bulk.put_many(session, batch[:2] + batch[3:], actor="import")
    assert [p.outcome for p in again] == ["unchanged"] * 3
    assert stored(engine)[:2] == (5, 6)
    bad = [*batch[:2], {"id": "pb-3", "text": "x", "learned_from": "A", "status": "gone"}]
    with transaction(engine) as session, pytest.raises(FieldProblem, match="status"):
        bulk.put_many(session, bad, actor="import")
    with transaction(engine) as session, pytest.raises(FieldProblem, match="given twice"):
        bulk.put_many(session, [batch[1], batch[1]], actor="import")
    assert stored(engine)[:2] == (5, 6)


def test_shorten_cuts_a_captured_lesson_at_a_word(engine: Engine) -> None:
    text = "Always pin the Stripe API version " * 100
    short, cut = fields.shorten(text, 100)
    assert cut and len(short) <= 100 and short.endswith("…")
    assert text.startswith(short[:-1]) and not short[:-1].endswith(" ")
    assert short[:-1].split()[-1] in text.split()  # a whole word, not half of one
    assert fields.shorten("Short enough", 100) == ("Short enough", False)
    assert fields.shorten("x" * 300, 100)[0] == "x" * 99 + "…"

"""Consolidation proposals in the database: propose, accept, edit, reject, undo, stale, rollback."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import Engine, func, select

from playbook import clock
from playbook.consolidation import store
from playbook.consolidation.groups import find_groups
from playbook.db import transaction
from playbook.errors import ConsolidationNotFound, InvalidTransition
from playbook.lessons import lifecycle, replacements
from playbook.lessons.fields import FieldProblem
from playbook.models import Bullet, Consolidation
from tests.playbook.consolidation.test_groups import DISTINCT, LOCK, RETRY

SCOPE = "acme/api"
T0 = datetime(2026, 11, 20, 9, 0, tzinfo=UTC)


@pytest.fixture
def playbook(engine: Engine) -> Engine:
    """pb-1..pb-5 distinct lessons sharing boilerplate; pb-6..pb-8 one instruction in three
    wordings (pb-7 the longest, with tags); pb-9, pb-10 another in two; pb-11 elsewhere."""
    rows = [
        *((text, "CTMS-1", []) for text in DISTINCT),
        (RETRY[0], "CTMS-12", ["webhooks"]),
        (RETRY[1], "OPS-77", ["webhooks", "retries"]),
        (RETRY[2], "CTMS-30", ["idempotency"]),
        (LOCK[0], "PAY-1", []),
        (LOCK[1], "PAY-2", []),
    ]
    with clock.frozen(T0), transaction(engine) as session:
        for text, learned_from, tags in rows:
            added = lifecycle.add(
                session, text, learned_from=learned_from, scope=SCOPE, tags=tags, actor="t"
            )
            assert added.created, text
        lifecycle.add(session, RETRY[0], learned_from="X-1", scope="other", actor="t")
    return engine


def propose(engine: Engine, *, dry_run: bool = False, at: datetime = T0) -> list[dict]:
    with clock.frozen(at), transaction(engine) as session:
        groups = find_groups(store.scope_lessons(session, SCOPE))
        made = store.propose(session, SCOPE, groups, dry_run=dry_run)
        return [store.as_dict(c) for c in made]


@pytest.fixture
def proposals(playbook: Engine) -> list[dict]:
    return propose(playbook)


def the(proposals: list[dict], member: str) -> dict:
    return next(p for p in proposals if member in p["member_ids"])


def bullet(engine: Engine, bullet_id: str) -> Bullet:
    with transaction(engine) as session:
        return lifecycle.get(session, bullet_id)


def test_proposals_are_the_paraphrase_groups_with_the_longest_member_as_draft(
    proposals: list[dict],
) -> None:
    assert sorted(p["member_ids"] for p in proposals) == [
        ["pb-6", "pb-7", "pb-8"],
        ["pb-9", "pb-10"],
    ]
    retry = the(proposals, "pb-6")
    assert retry["status"] == "open"
    assert retry["draft"] == max(RETRY, key=len)
    assert retry["draft_source"] == "longest"
    assert retry["saves_chars"] == sum(map(len, RETRY)) - len(max(RETRY, key=len))
    assert retry["similarity"] >= 0.5
    assert [m["id"] for m in retry["members"]] == ["pb-6", "pb-7", "pb-8"]
    assert retry["members"][1] == {
        "id": "pb-7",
        "text": RETRY[1],
        "learned_from": "OPS-77",
        "status": "active",
    }
    # The draft (pb-6's words) lacks a word of pb-8's, named for the reviewer.
    assert retry["dropped_terms"] == {"pb-8": ["use"]}
    assert retry["created_at"] == T0.isoformat()
    assert retry["decided_at"] is None


def test_a_dry_run_proposes_without_storing_and_a_second_run_proposes_nothing_new(
    playbook: Engine,
) -> None:
    assert len(propose(playbook, dry_run=True)) == 2
    with transaction(playbook) as session:
        assert session.scalar(select(func.count()).select_from(Consolidation)) == 0
    assert len(propose(playbook)) == 2
    assert propose(playbook) == []  # the same groups are open already


def test_accepting_makes_the_merged_lesson_and_supersedes_each_member_by_it(
    playbook: Engine, proposals: list[dict]
) -> None:
    retry = the(proposals, "pb-6")
    with clock.frozen(T0 + timedelta(hours=1)), transaction(playbook) as session:
        done = store.accept(session, retry["id"], actor="alice")
        merged_id = done.merged_id
        assert (done.status, done.decided_by) == ("accepted", "alice")
        assert done.decided_at == T0 + timedelta(hours=1)
    merged = bullet(playbook, merged_id)
    assert merged_id == "pb-12"
    assert (merged.status, merged.scope, merged.text) == ("active", SCOPE, max(RETRY, key=len))
    assert merged.learned_from == "CTMS-12"  # the longest member's ticket
    assert merged.tags == ["webhooks", "retries", "idempotency"]
    assert merged.source == "consolidation"
    with transaction(playbook) as session:
        assert replacements.superseded_by_it(session, merged_id) == ["pb-6", "pb-7", "pb-8"]
        # A cite of a member's id, made after the merge, counts for the merged lesson.
        assert replacements.live_replacements(session, ["pb-7", "pb-9"]) == {"pb-7": merged_id}
        history = lifecycle.history(session, "pb-7")
        assert history[-1].action == "supersede"
        assert f"consolidated into {merged_id} (consolidation {retry['id']})" in (
            history[-1].reason or ""
        )
        # Accepted once: again is refused, saying why and what to do.
        with pytest.raises(InvalidTransition, match=r"is accepted.*undo it first"):
            store.accept(session, retry["id"], actor="alice")
    assert propose(playbook) == []  # the members are no longer active


def test_an_edited_text_is_what_the_merged_lesson_says(
    playbook: Engine, proposals: list[dict]
) -> None:
    edited = (
        "Retry a webhook delivery with its idempotency key: a replayed delivery must not be "
        "applied twice (pb-6, pb-7, pb-8)"
    )
    with transaction(playbook) as session:
        done = store.accept(session, the(proposals, "pb-6")["id"], actor="alice", text=edited)
        assert (done.draft, done.draft_source) == (edited, "edited")
        merged_id = done.merged_id
    assert bullet(playbook, merged_id).text == edited
    with transaction(playbook) as session, pytest.raises(FieldProblem, match="text"):
        store.accept(session, the(proposals, "pb-9")["id"], actor="alice", text="   ")
    assert bullet(playbook, "pb-9").status == "active"


def test_a_rejected_group_comes_back_only_once_a_member_changes(
    playbook: Engine, proposals: list[dict]
) -> None:
    lock = the(proposals, "pb-9")
    with transaction(playbook) as session:
        done = store.reject(session, lock["id"], actor="bob", reason="they differ on purpose")
        assert (done.status, done.decided_by, done.reason) == (
            "rejected",
            "bob",
            "they differ on purpose",
        )
        with pytest.raises(InvalidTransition, match="is rejected"):
            store.accept(session, lock["id"], actor="bob")
    assert propose(playbook) == []
    with clock.frozen(T0 + timedelta(days=1)), transaction(playbook) as session:
        lifecycle.edit(
            session,
            "pb-10",
            actor="bob",
            text="Do not keep a database lock while calling the payment provider over HTTP",
        )
    again = propose(playbook, at=T0 + timedelta(days=2))
    assert [p["member_ids"] for p in again] == [["pb-9", "pb-10"]]
    assert again[0]["id"] != lock["id"]


def test_undo_brings_the_members_back_and_archives_the_merged_lesson(
    playbook: Engine, proposals: list[dict]
) -> None:
    retry = the(proposals, "pb-6")
    with transaction(playbook) as session:
        merged_id = store.accept(session, retry["id"], actor="alice").merged_id
    with transaction(playbook) as session:
        done = store.undo(session, retry["id"], actor="carol", reason="too much lost")
        assert (done.status, done.decided_by, done.reason) == ("undone", "carol", "too much lost")
    for member in ("pb-6", "pb-7", "pb-8"):
        restored = bullet(playbook, member)
        assert (restored.status, restored.superseded_by) == ("active", None)
    assert bullet(playbook, merged_id).status == "archived"
    with transaction(playbook) as session:
        with pytest.raises(InvalidTransition, match="is undone"):
            store.undo(session, retry["id"], actor="carol")
        with pytest.raises(InvalidTransition, match="is open, not accepted"):
            store.undo(session, the(proposals, "pb-9")["id"], actor="carol")
    assert propose(playbook) == []  # undone: not proposed again while nothing changed


def test_accepting_after_a_member_changed_is_refused_and_the_next_run_proposes_anew(
    playbook: Engine, proposals: list[dict]
) -> None:
    retry = the(proposals, "pb-6")
    with clock.frozen(T0 + timedelta(hours=2)), transaction(playbook) as session:
        lifecycle.edit(session, "pb-8", actor="bob", text=RETRY[2] + " Log the key too.")
    with (
        transaction(playbook) as session,
        pytest.raises(InvalidTransition, match="pb-8 changed since the proposal"),
    ):
        store.accept(session, retry["id"], actor="alice")
    with clock.frozen(T0 + timedelta(hours=3)), transaction(playbook) as session:
        lifecycle.deprecate(session, "pb-10", reason="wrong", actor="bob")
    with (
        transaction(playbook) as session,
        pytest.raises(InvalidTransition, match="pb-10 is deprecated since the proposal"),
    ):
        store.accept(session, the(proposals, "pb-9")["id"], actor="alice")
    again = propose(playbook, at=T0 + timedelta(hours=4))
    assert [p["member_ids"] for p in again] == [["pb-6", "pb-7", "pb-8"]]
    with transaction(playbook) as session:
        old = store.get(session, retry["id"])
        assert (old.status, old.reason) == ("stale", "pb-8 changed since the proposal")
        assert store.get(session, the(proposals, "pb-9")["id"]).status == "stale"
        assert [c.id for c in store.listing(session, status="open")] == [again[0]["id"]]


def test_a_failure_midway_through_accepting_leaves_nothing_behind(
    playbook: Engine, proposals: list[dict]
) -> None:
    retry = the(proposals, "pb-6")

    def fail_on_the_second_member(_session, changed: Bullet) -> None:
        if changed.id == "pb-7" and changed.status == "superseded":
            raise RuntimeError("the disk is full")

    lifecycle.change_listeners.append(fail_on_the_second_member)
    try:
        with pytest.raises(RuntimeError), transaction(playbook) as session:
            store.accept(session, retry["id"], actor="alice")
    finally:
        lifecycle.change_listeners.remove(fail_on_the_second_member)
    with transaction(playbook) as session:
        assert session.scalar(select(func.count()).select_from(Bullet)) == 11
        statuses = session.scalars(select(Bullet.status).where(Bullet.scope == SCOPE))
        assert set(statuses) == {"active"}
        assert store.get(session, retry["id"]).status == "open"
    with transaction(playbook) as session:  # and it can be accepted for real afterwards
        assert store.accept(session, retry["id"], actor="alice").merged_id == "pb-12"


def test_a_model_draft_is_measured_again(playbook: Engine, proposals: list[dict]) -> None:
    retry = the(proposals, "pb-6")
    draft = "Use the idempotency key to retry a webhook delivery: a replay is never applied twice"
    with transaction(playbook) as session:
        done = store.set_draft(session, retry["id"], draft, source="model", model="tiny-merge")
        assert (done.draft_source, done.model) == ("model", "tiny-merge")
        assert done.saves_chars == sum(map(len, RETRY)) - len(draft)
        assert done.dropped_terms == {}
        lossy = "Use the idempotency key to retry a webhook delivery"
        done = store.set_draft(session, retry["id"], lossy, source="model", model="tiny-merge")
        assert done.dropped_terms == {
            "pb-6": ["replay", "applied", "twice"],
            "pb-7": ["replayed"],
            "pb-8": ["replay", "apply", "twice"],
        }
        with pytest.raises(FieldProblem, match="source"):
            store.set_draft(session, retry["id"], draft, source="magic", model=None)
        with pytest.raises(FieldProblem, match="text: is 2,001 characters long"):
            store.set_draft(session, retry["id"], "x" * 2001, source="model", model=None)
        store.reject(session, retry["id"], actor="bob")
        with pytest.raises(InvalidTransition, match="is rejected"):
            store.set_draft(session, retry["id"], draft, source="model", model=None)


def test_lookups_listing_and_the_dict(playbook: Engine, proposals: list[dict]) -> None:
    with transaction(playbook) as session:
        for missing in (999, "999", "abc", "", "-1", True):
            with pytest.raises(ConsolidationNotFound, match="no consolidation with id"):
                store.get(session, missing)
        first = proposals[0]["id"]
        assert store.get(session, str(first)).id == first
        assert len(store.listing(session, scope=SCOPE)) == 2
        assert store.listing(session, scope="other") == []
        assert store.listing(session, status="accepted") == []
        assert len(store.listing(session, limit=1)) == 1
        with pytest.raises(FieldProblem, match="status"):
            store.listing(session, status="nope")
        with pytest.raises(FieldProblem, match="limit"):
            store.listing(session, limit=0)
        shown = store.as_dict(store.get(session, first), members=False)
    assert "members" not in shown
    assert set(shown) == {
        "id", "scope", "status", "member_ids", "draft", "draft_source", "model", "saves_chars",
        "similarity", "dropped_terms", "merged_id", "created_at", "decided_at", "decided_by",
        "reason",
    }  # fmt: skip


def test_hashes_depend_on_ids_and_texts_not_on_order() -> None:
    a = Bullet(id="pb-2", text="x")
    b = Bullet(id="pb-10", text="y")
    assert store.members_hash([a, b]) == store.members_hash([b, a])
    assert store.members_hash([a, b]) != store.members_hash([a, Bullet(id="pb-10", text="z")])
    assert store.group_key(["pb-10", "pb-2"]) == store.group_key(["pb-2", "pb-10"])
    assert store.group_key(["pb-1", "pb-2"]) != store.group_key(["pb-1", "pb-3"])


@pytest.fixture(autouse=True)
def _no_listeners_left() -> Iterator[None]:
    before = list(lifecycle.change_listeners)
    yield
    assert lifecycle.change_listeners == before


def test_a_merged_text_that_duplicates_a_lesson_outside_the_group_is_refused(
    playbook: Engine, proposals: list[dict]
) -> None:
    retry = the(proposals, "pb-6")
    with transaction(playbook) as session:  # moved in by an edit, which checks no duplicates
        lifecycle.edit(session, "pb-11", actor="t", scope=SCOPE)
    with (
        transaction(playbook) as session,
        pytest.raises(
            InvalidTransition, match="nearly duplicates pb-11, which is not in the group"
        ),
    ):
        store.accept(session, retry["id"], actor="alice")
    assert bullet(playbook, "pb-6").status == "active"

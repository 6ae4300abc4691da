"""Concurrent status changes of one lesson: exactly one writer changes it, and its history says so
once; the others are refused (they read the old status) or find nothing left to change."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from sqlalchemy import Engine, func, select

from playbook import transitions
from playbook.db import transaction
from playbook.errors import InvalidTransition
from playbook.lessons import lifecycle
from playbook.models import Bullet, Revision
from tests.racing import all_read_first, kinds, race

N = 20


def _lesson(engine: Engine, status: str) -> str:
    """A new lesson with ``status`` (reached through the lifecycle, as a user would)."""
    with transaction(engine) as session:
        first = "active" if status != "proposed" else "proposed"
        added = lifecycle.add(
            session,
            "Pin the chromium version in CI so screenshot diffs stay stable",
            learned_from="CTMS-1",
            actor="t",
            status=first,
        )
        bullet_id = added.bullet.id
        if status == "deprecated":
            lifecycle.deprecate(session, bullet_id, reason="flaky", actor="t")
    return bullet_id


def _actions(engine: Engine, bullet_id: str, action: str) -> int:
    with transaction(engine) as session:
        return session.scalar(
            select(func.count())
            .select_from(Revision)
            .where(Revision.bullet_id == bullet_id, Revision.action == action)
        )


CALLS: dict[str, tuple[str, str, Callable[..., Any]]] = {
    # action: (the status it starts from, the status it ends in, the call)
    "restore": ("deprecated", "active", lambda s, b, i: lifecycle.restore(s, b, actor=f"u{i}")),
    "approve": ("proposed", "active", lambda s, b, i: lifecycle.approve(s, b, actor=f"u{i}")),
    "deprecate": (
        "active",
        "deprecated",
        lambda s, b, i: lifecycle.deprecate(s, b, reason=f"reason {i}", actor=f"u{i}"),
    ),
    "archive": (
        "active",
        "archived",
        lambda s, b, i: lifecycle.archive(s, b, reason=f"reason {i}", actor=f"u{i}"),
    ),
}


@pytest.mark.parametrize("action", sorted(CALLS))
def test_twenty_concurrent_changes_of_one_lesson_change_it_once(
    engine: Engine, monkeypatch: pytest.MonkeyPatch, action: str
) -> None:
    start, end, call = CALLS[action]
    bullet_id = _lesson(engine, start)

    def one(i: int) -> bool:
        with transaction(engine) as session:
            return call(session, bullet_id, i).changed

    with all_read_first(monkeypatch, engine, lifecycle, "get", N):
        counts = kinds(race(N, one), changed=bool)

    assert counts["changed"] == 1, counts
    # The others lost the race (a 409 at every door) or came after the winner had committed.
    assert counts["refused"] + counts["unchanged"] == N - 1, counts
    if engine.dialect.name == "postgresql":
        assert counts["refused"] == N - 1, counts  # every one of them had read the old status
    assert _actions(engine, bullet_id, action) == 1
    with transaction(engine) as session:
        assert session.get(Bullet, bullet_id).status == end  # type: ignore[union-attr]


def test_supersede_by_two_different_lessons_at_once_keeps_one_replacement(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    with transaction(engine) as session:
        old = lifecycle.add(session, "Retry webhooks", learned_from="CTMS-1", actor="t").bullet.id
        by = [
            lifecycle.add(session, text, learned_from="CTMS-2", actor="t").bullet.id
            for text in ("Vendor the chart library", "Cache the search index between requests")
        ]

    def one(i: int) -> bool:
        with transaction(engine) as session:
            return lifecycle.supersede(session, old, by[i % 2], actor=f"u{i}").changed

    with all_read_first(monkeypatch, engine, lifecycle, "get", 2):
        counts = kinds(race(2, one), changed=bool)

    assert counts["changed"] == 1 and counts["refused"] == 1, counts
    assert _actions(engine, old, "supersede") == 1
    with transaction(engine) as session:
        replaced = session.get(Bullet, old)
        assert replaced is not None and replaced.superseded_by in by
        # The replacement's history names the lesson it replaced only when it did.
        notes = session.scalars(select(Revision.bullet_id).where(Revision.action == "replace"))
        assert list(notes) == [replaced.superseded_by]


def test_a_conflict_is_a_refused_transition_saying_to_look_again(engine: Engine) -> None:
    # The loser is answered as a wrong status is: InvalidTransition, a 409 at every door.
    assert issubclass(transitions.Conflict, InvalidTransition)
    bullet_id = _lesson(engine, "active")
    with transaction(engine) as session:
        bullet = session.get(Bullet, bullet_id)
        with pytest.raises(transitions.Conflict, match=f"{bullet_id} changed"):
            transitions.require(session, bullet, "proposed", "active", what=bullet_id)
        assert transitions.claim(session, bullet, "active", "active")


def test_an_accept_racing_deprecations_of_its_members_never_deadlocks(engine: Engine) -> None:
    # Accepting takes the proposal's row, the playbook's version row, then each member's;
    # a deprecation takes the version row, then its lesson's. One order for all: PostgreSQL
    # never has to break a cycle (a deadlock would surface as "database unavailable").
    from playbook.consolidation import store
    from tests.webhooks.consolidating import open_consolidation

    texts = (
        "Retry the upload with an idempotency key when the storage API times out",
        "Storage calls that hang need a second attempt; reuse the same key each time",
    )
    for round_ in range(5):
        number, members = open_consolidation(
            engine, [f"{text} (round {round_})" for text in texts], scope=f"s{round_}"
        )

        def one(i: int, number: int = number, members: list[str] = members) -> Any:
            with transaction(engine) as session:
                if i == 0:
                    return store.accept(session, number, actor="boss").merged_id
                bullet_id = members[i % 2]
                return lifecycle.deprecate(session, bullet_id, reason="old", actor=f"u{i}")

        results = race(5, one)
        unexpected = [r for r in results if isinstance(r, Exception)]
        assert all(isinstance(r, InvalidTransition) for r in unexpected), unexpected
        with transaction(engine) as session:
            statuses = {session.get(Bullet, m).status for m in members}  # type: ignore[union-attr]
        # Either the merge won (both superseded) or a deprecation did (the merge was refused).
        assert statuses <= {"superseded"} or "deprecated" in statuses
        accepted = not isinstance(results[0], Exception)
        assert accepted == (statuses == {"superseded"})


def test_a_caller_going_on_after_a_conflict_writes_nothing_of_the_lost_change(
    engine: Engine,
) -> None:
    if engine.dialect.name != "postgresql":
        pytest.skip("SQLite opens each write transaction with BEGIN IMMEDIATE: no stale read")
    from sqlalchemy.orm import Session

    bullet_id = _lesson(engine, "deprecated")
    with Session(engine) as late:
        read = lifecycle.get(late, bullet_id)  # read: deprecated
        with transaction(engine) as first:  # meanwhile someone archives it
            lifecycle.archive(first, bullet_id, reason="unused", actor="prune")
        with pytest.raises(transitions.Conflict):
            lifecycle.restore(late, bullet_id, actor="late")
        late.commit()  # a caller that caught the Conflict and went on
        assert read is not None
    with transaction(engine) as session:
        assert session.get(Bullet, bullet_id).status == "archived"  # type: ignore[union-attr]
    assert _actions(engine, bullet_id, "restore") == 0

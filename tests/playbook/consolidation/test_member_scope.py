"""A consolidation's members stay in its scope: a member moved away makes the proposal stale.

Its text unchanged, a moved member still hashes alike; accepting would supersede another
owner's lesson by a merged lesson they cannot read and carry its words into the group's
scope. Accept refuses it (and any proposal whose members are of several scopes), the API
answers 409, and the next run of consolidate marks the proposal stale.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import Engine, func, select

from playbook import clock
from playbook.consolidation import store
from playbook.consolidation.groups import Group
from playbook.db import transaction
from playbook.errors import InvalidTransition
from playbook.lessons import lifecycle
from playbook.models import Bullet, Consolidation
from tests.playbook.consolidation.test_groups import RETRY
from tests.webhooks.consolidating import open_consolidation

SCOPE, AWAY = "acme/api", "victim/secret"
T0 = datetime(2026, 11, 20, 9, 0, tzinfo=UTC)


def _state(engine: Engine) -> list[tuple[str, str, str, str | None]]:
    with transaction(engine) as session:
        rows = session.execute(select(Bullet.id, Bullet.status, Bullet.scope, Bullet.superseded_by))
        return sorted(tuple(row) for row in rows)


@pytest.fixture
def moved(engine: Engine) -> tuple[int, list[str]]:
    """An open proposal of SCOPE whose last member was moved to AWAY since, text unchanged."""
    with clock.frozen(T0):
        proposal, members = open_consolidation(engine, RETRY, scope=SCOPE)
    with clock.frozen(T0 + timedelta(hours=1)), transaction(engine) as session:
        lifecycle.edit(session, members[-1], actor="bob", scope=AWAY)
        consolidation = store.get(session, proposal)
        # The text hash alone cannot tell: this is the case the scope check is for.
        assert store.members_hash(store._members(session, members)) == consolidation.members_hash
    return proposal, members


def test_a_member_moved_to_another_scope_cannot_be_accepted(
    engine: Engine, moved: tuple[int, list[str]]
) -> None:
    proposal, members = moved
    before = _state(engine)
    with (
        transaction(engine) as session,
        pytest.raises(InvalidTransition, match=f"{members[-1]} is no longer in the scope {SCOPE}"),
    ):
        store.accept(session, proposal, actor="alice")
    assert _state(engine) == before  # no merged lesson, no member superseded
    with transaction(engine) as session:
        assert store.get(session, proposal).status == "open"


def test_the_next_run_marks_it_stale(engine: Engine, moved: tuple[int, list[str]]) -> None:
    proposal, members = moved
    with clock.frozen(T0 + timedelta(hours=2)), transaction(engine) as session:
        store.propose(session, SCOPE, [])
    with transaction(engine) as session:
        stale = store.get(session, proposal)
        assert (stale.status, stale.reason) == (
            "stale",
            f"{members[-1]} is no longer in the scope {SCOPE}",
        )


def test_the_api_answers_409(api, engine: Engine, moved: tuple[int, list[str]]) -> None:
    proposal, _members = moved
    before = _state(engine)
    answer = api.post(
        f"/api/v1/consolidations/{proposal}/accept",
        json={},
        headers={"Authorization": "Bearer maintainer-token"},
    )
    assert answer.status_code == 409, answer.text
    assert "no longer in the scope" in answer.get_json()["detail"]
    assert _state(engine) == before


def test_a_proposal_of_members_of_several_scopes_is_refused(engine: Engine) -> None:
    """However it was stored (by hand, an older version): accept checks every member."""
    with transaction(engine) as session:
        ours = lifecycle.add(session, RETRY[0], learned_from="A-1", actor="t", scope=SCOPE)
        theirs = lifecycle.add(session, RETRY[1], learned_from="B-1", actor="t", scope=AWAY)
        members = [ours.bullet, theirs.bullet]
        row = Consolidation(
            scope=SCOPE,
            member_ids=[b.id for b in members],
            group_key=store.group_key(b.id for b in members),
            members_hash=store.members_hash(members),
            draft=RETRY[0],
            draft_source="longest",
            dropped_terms={},
            saves_chars=1,
            similarity=0.9,
            status="open",
            created_at=clock.now(),
        )
        session.add(row)
        session.flush()
        proposal = row.id
    before = _state(engine)
    with transaction(engine) as session, pytest.raises(InvalidTransition, match="scope"):
        store.accept(session, proposal, actor="alice")
    with transaction(engine) as session:
        assert session.scalar(select(func.count()).select_from(Bullet)) == 2
    assert _state(engine) == before


def test_a_group_of_another_scope_is_not_proposed(engine: Engine) -> None:
    with transaction(engine) as session:
        ours = lifecycle.add(session, RETRY[0], learned_from="A-1", actor="t", scope=SCOPE)
        theirs = lifecycle.add(session, RETRY[1], learned_from="B-1", actor="t", scope=AWAY)
        group = Group(member_ids=(ours.bullet.id, theirs.bullet.id), similarity=0.9)
        assert store.propose(session, SCOPE, [group]) == []

"""Supersession in the domain: a newer lesson replaces an older one, kept, linked both ways."""

from __future__ import annotations

import io
import json
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import Engine

from playbook import agents, clock
from playbook.db import transaction
from playbook.errors import BulletNotFound, InvalidTransition
from playbook.lessons import lifecycle, replacements
from playbook.lessons.fields import FieldProblem
from playbook.outcomes import evidence, usage
from playbook.transfer import export, imports
from tests.support import saw

OLD = "Pin the v1 payments client to 1.4 because 1.5 breaks refunds"
NEW = "Use the v2 payments client because it handles refunds and retries"
# Shares 2/3 of OLD's words: much like it, not a near-duplicate (0.8).
SIMILAR = "Pin the v2 payments client to 2.0 because 1.5 breaks refunds and retries"
T0 = datetime(2026, 11, 3, 9, 0, tzinfo=UTC)
MAINTAINER = agents.Caller(actor="maintainer", role="maintainer")


@pytest.fixture
def pair(engine: Engine) -> tuple[str, str]:
    """OLD (pb-1) and NEW (pb-2), both active in the global scope."""
    with clock.frozen(T0), transaction(engine) as session:
        old = lifecycle.add(session, OLD, learned_from="PAY-1", actor="t").bullet.id
        new = lifecycle.add(session, NEW, learned_from="PAY-2", actor="t").bullet.id
    return old, new


def supersede(engine: Engine, old: str, new: str, reason: str | None = "v2 fixes refunds"):
    with clock.frozen(T0 + timedelta(days=1)), transaction(engine) as session:
        return lifecycle.supersede(session, old, new, actor="alice", reason=reason).changed


def found(engine: Engine, query: str) -> list[str]:
    with transaction(engine) as session:
        return [hit.id for hit in agents.search(session, MAINTAINER, query).lessons]


def test_a_superseded_lesson_leaves_retrieval_and_points_to_its_replacement(
    engine: Engine, pair: tuple[str, str]
) -> None:
    old, new = pair
    assert set(found(engine, "payments client refunds")) == {old, new}
    assert supersede(engine, old, new) is True
    assert found(engine, "payments client refunds") == [new]
    with transaction(engine) as session:
        bullet = lifecycle.get(session, old)
        assert (bullet.status, bullet.superseded_by) == ("superseded", new)
        assert bullet.demoted_reason == "v2 fixes refunds"
        assert bullet.demoted_on == T0 + timedelta(days=1)
        assert replacements.superseded_by_it(session, new) == [old]
        detail = agents.get_lesson(session, MAINTAINER, old)
        assert detail.superseded_by == new and detail.supersedes == []
        assert agents.get_lesson(session, MAINTAINER, new).supersedes == [old]
        # Both histories keep the change; the replacement's own fields did not change.
        old_history = [(r.action, r.actor, r.reason) for r in lifecycle.history(session, old)]
        assert old_history[-1] == ("supersede", "alice", f"superseded by {new}: v2 fixes refunds")
        last = lifecycle.history(session, new)[-1]
        assert (last.action, last.reason) == ("replace", f"supersedes {old}: v2 fixes refunds")
        assert last.before == last.after
        assert lifecycle.get(session, new).status == "active"
    # The same request again changes nothing.
    assert supersede(engine, old, new) is False


def test_restore_undoes_it(engine: Engine, pair: tuple[str, str]) -> None:
    old, new = pair
    supersede(engine, old, new)
    with transaction(engine) as session:
        assert lifecycle.restore(session, old, actor="bob").changed
        bullet = lifecycle.get(session, old)
        assert (bullet.status, bullet.superseded_by, bullet.demoted_on) == ("active", None, None)
        assert replacements.superseded_by_it(session, new) == []
    assert set(found(engine, "payments client refunds")) == {old, new}


def test_revert_of_the_supersede_revision_undoes_it_too(
    engine: Engine, pair: tuple[str, str]
) -> None:
    old, new = pair
    supersede(engine, old, new)
    with transaction(engine) as session:
        revision = lifecycle.history(session, old)[-1]
        lifecycle.revert(session, old, revision.id, actor="bob")
        assert lifecycle.get(session, old).superseded_by is None
        restored = lifecycle.history(session, old)[-1]
        # Undoing the undo puts the link back, checked as a new supersession would be.
        lifecycle.revert(session, old, restored.id, actor="bob")
        assert lifecycle.get(session, old).superseded_by == new
        lifecycle.restore(session, old, actor="bob")
        lifecycle.deprecate(session, new, reason="wrong too", actor="bob")
        with pytest.raises(InvalidTransition, match="deprecated"):
            lifecycle.revert(session, old, restored.id, actor="bob")


def test_conflicts_are_refused_with_what_to_do(engine: Engine, pair: tuple[str, str]) -> None:
    old, new = pair
    with transaction(engine) as session:
        third = lifecycle.add(session, "Log every refund", learned_from="PAY-3", actor="t")
    third_id = third.bullet.id
    with transaction(engine) as session:
        with pytest.raises(InvalidTransition, match="cannot supersede itself"):
            lifecycle.supersede(session, old, old, actor="a")
        with pytest.raises(BulletNotFound) as missing:
            lifecycle.supersede(session, old, "pb-99", actor="a")
        assert missing.value.field == "by"
        with pytest.raises(FieldProblem, match="by"):
            lifecycle.supersede(session, old, "pb 9", actor="a")
        lifecycle.deprecate(session, third_id, reason="noise", actor="a")
        with pytest.raises(InvalidTransition, match="active or proposed"):
            lifecycle.supersede(session, old, third_id, actor="a")
    supersede(engine, old, new)
    with transaction(engine) as session:
        lifecycle.restore(session, third_id, actor="a")
        with pytest.raises(InvalidTransition, match=f"already superseded by {new}"):
            lifecycle.supersede(session, old, third_id, actor="a")
        with pytest.raises(InvalidTransition, match="cycle"):
            lifecycle.supersede(session, new, old, actor="a")
        # Deprecating or archiving a superseded lesson keeps it as it is, linked.
        assert not lifecycle.deprecate(session, old, reason="x", actor="a").changed
        assert not lifecycle.archive(session, old, reason="x", actor="a").changed
        assert lifecycle.get(session, old).superseded_by == new


def test_export_import_and_as_of_keep_the_link(engine: Engine, pair: tuple[str, str]) -> None:
    old, new = pair
    supersede(engine, old, new)
    with transaction(engine) as session:
        text = export.export_bullets(session, "jsonl")
        earlier = {row["id"]: row for row in lifecycle.as_of(session, T0 + timedelta(hours=1))}
        later = {row["id"]: row for row in lifecycle.as_of(session, T0 + timedelta(days=2))}
    records = {json.loads(line)["id"]: json.loads(line) for line in text.splitlines()}
    assert records[old] | {"status": "superseded", "superseded_by": new} == records[old]
    assert earlier[old]["superseded_by"] is None and earlier[old]["status"] == "active"
    assert later[old]["superseded_by"] == new
    # Into another playbook: the same link; a superseded entry must name its replacement.
    with transaction(engine) as session:
        lifecycle.restore(session, old, actor="t")
    with transaction(engine) as session:
        imports.import_bullets(
            session, lambda: io.BytesIO(text.encode()), "jsonl", actor="t", source_name="x.jsonl"
        )
    with transaction(engine) as session:
        assert lifecycle.get(session, old).superseded_by == new
        assert lifecycle.get(session, old).status == "superseded"
    with pytest.raises(FieldProblem, match="superseded_by"):
        imports.bullet_values({"text": "x", "learned_from": "A-1", "status": "superseded"})
    with pytest.raises(FieldProblem, match="superseded_by"):
        imports.bullet_values({"text": "x", "learned_from": "A-1", "superseded_by": "pb-2"})


def test_cites_of_a_superseded_lesson_count_for_the_replacement_only_if_asked(
    engine: Engine, pair: tuple[str, str]
) -> None:
    old, new = pair
    saw(engine, "PAY-7", "PAY-8")
    with transaction(engine) as session:
        # A cite made before the supersession never counts for the replacement.
        usage.record_once(session, "cited", [old], ticket_key="PAY-6", credit_replacement=True)
    supersede(engine, old, new)
    with transaction(engine) as session:
        usage.record_once(session, "cited", [old], ticket_key="PAY-7")
        usage.record_once(session, "cited", [old], ticket_key="PAY-8", credit_replacement=True)
        # Naming both counts once for the replacement.
        usage.record_once(session, "cited", [old, new], ticket_key="PAY-9", credit_replacement=True)
        evidence.cite(session, "acme/api#5", "PAY-8", f"Used {old}", "pr")
        evidence.cite(session, "acme/api#6", "PAY-8", f"Used {old}", "pr", credit_replacement=True)
    with transaction(engine) as session:
        assert lifecycle.get(session, old).cites == 6
        assert lifecycle.get(session, new).cites == 3
        cited_prs = {e.pr_key for e in usage.events_for(session, new) if e.kind == "cited"}
        assert cited_prs == {None, "acme/api#6"}


def test_add_names_a_similar_live_lesson_but_not_a_duplicate_or_unrelated_one(
    engine: Engine, pair: tuple[str, str]
) -> None:
    old, _ = pair
    with transaction(engine) as session:
        similar = lifecycle.add(session, SIMILAR, learned_from="PAY-4", actor="t")
        assert similar.created and similar.similar is not None
        assert similar.similar.id == old and 0.5 <= similar.similar.overlap < 0.8
        unrelated = lifecycle.add(session, "Vendor the chart lib", learned_from="W-1", actor="t")
        assert unrelated.created and unrelated.similar is None
        duplicate = lifecycle.add(session, OLD + " today", learned_from="PAY-5", actor="t")
        assert not duplicate.created and duplicate.similar is None
        # Another scope is not compared.
        elsewhere = lifecycle.add(session, SIMILAR, learned_from="P-1", actor="t", scope="o/r")
        assert elsewhere.created and elsewhere.similar is None


def test_an_agents_md_block_says_which_lesson_replaced_one_it_dropped(
    engine: Engine, pair: tuple[str, str]
) -> None:
    from playbook.repos import syncs
    from playbook.scopes import View

    old, new = pair
    supersede(engine, old, new)
    with transaction(engine) as session:
        reasons = syncs.why_removed(session, [old], View("global"))
    assert reasons == {old: f"superseded by {new}: v2 fixes refunds"}

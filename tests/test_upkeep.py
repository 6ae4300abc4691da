"""Prune and stats with a controllable clock: every gate and every transition."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import Engine

from playbook import clock, lifecycle, upkeep, usage
from playbook.db import transaction

T0 = datetime(2026, 1, 1, 9, 0, tzinfo=UTC)


def at(days: float):
    return clock.frozen(T0 + timedelta(days=days))


def add(engine: Engine, text: str, day: float = 0) -> str:
    with at(day), transaction(engine) as session:
        return lifecycle.add(session, text, learned_from="A-1", actor="t").bullet.id


def event(
    engine: Engine, kind: str, bullet_id: str, day: float, success: bool | None = None
) -> None:
    with at(day), transaction(engine) as session:
        usage.record(session, kind, [bullet_id], ticket_key="A-2", success=success)


def prune(engine: Engine, day: float, **kwargs: object) -> upkeep.PruneReport:
    with at(day), transaction(engine) as session:
        return upkeep.prune(session, **kwargs)  # type: ignore[arg-type]


@pytest.fixture
def playbook(engine: Engine) -> Engine:
    add(engine, "Unused lesson about retries")  # pb-1
    add(engine, "Lesson loaded recently about locks")  # pb-2
    add(engine, "Lesson cited recently about caches")  # pb-3
    event(engine, "loaded", "pb-1", day=1)  # the usage log starts on day 1
    return engine


def test_nothing_is_pruned_until_the_log_spans_the_observation_window(playbook: Engine) -> None:
    report = prune(playbook, day=20, apply=True)
    assert report.candidates == [] and report.archived == []
    assert report.blocked is not None and "spans 19.0 days" in report.blocked
    assert "11.0 more" in report.blocked


def test_dry_run_lists_candidates_and_changes_nothing(playbook: Engine) -> None:
    event(playbook, "loaded", "pb-2", day=50)
    event(playbook, "cited", "pb-3", day=55, success=True)
    report = prune(playbook, day=60)
    assert [c.bullet_id for c in report.candidates] == ["pb-1"]
    [candidate] = report.candidates
    assert (candidate.age_days, candidate.loads, candidate.last_loaded_at) == (
        60,
        1,
        T0 + timedelta(days=1),
    )
    with transaction(playbook) as session:
        assert lifecycle.get(session, "pb-1").status == "active"


def test_apply_archives_with_reason_and_restore_undoes_it(playbook: Engine) -> None:
    event(playbook, "loaded", "pb-2", day=50)
    event(playbook, "cited", "pb-3", day=55, success=True)
    report = prune(playbook, day=60, apply=True, idle_days=30)
    assert report.archived == ["pb-1"]
    with transaction(playbook) as session:
        bullet = lifecycle.get(session, "pb-1")
        assert (bullet.status, bullet.demoted_reason) == ("archived", "unused_30d")
        assert bullet.demoted_on == T0 + timedelta(days=60)
        assert lifecycle.history(session, "pb-1")[-1].actor == "prune"
        lifecycle.restore(session, "pb-1", actor="alice")
        assert lifecycle.get(session, "pb-1").status == "active"


def test_young_bullets_are_never_candidates(playbook: Engine) -> None:
    add(playbook, "A lesson added last week", day=53)  # pb-4
    report = prune(playbook, day=60, min_age_days=30)
    assert "pb-4" not in [c.bullet_id for c in report.candidates]
    assert "pb-4" in [c.bullet_id for c in prune(playbook, day=60, min_age_days=5).candidates]


def test_idle_window_edges(playbook: Engine) -> None:
    event(playbook, "loaded", "pb-2", day=30)  # exactly 30 days before day 60
    event(playbook, "loaded", "pb-3", day=29.9)  # just outside
    ids = [c.bullet_id for c in prune(playbook, day=60, idle_days=30).candidates]
    assert ids == ["pb-1", "pb-3"]


def test_a_successful_cite_in_the_window_protects_a_bullet(playbook: Engine) -> None:
    event(playbook, "cited", "pb-1", day=45, success=True)
    ids = [c.bullet_id for c in prune(playbook, day=60).candidates]
    assert "pb-1" not in ids


def test_only_active_bullets_are_candidates(playbook: Engine) -> None:
    with at(2), transaction(playbook) as session:
        lifecycle.deprecate(session, "pb-1", reason="wrong", actor="x")
    ids = [c.bullet_id for c in prune(playbook, day=60).candidates]
    assert "pb-1" not in ids


def test_markdown_report(playbook: Engine) -> None:
    blocked = upkeep.prune_markdown(prune(playbook, day=10))
    assert blocked.startswith("## Playbook prune (dry run)") and "Nothing pruned" in blocked
    text = upkeep.prune_markdown(prune(playbook, day=60))
    assert "| pb-1 | 60 | 2026-01-02 | never | 1 | 0 | Unused lesson about retries |" in text
    assert "--apply" in text


def test_stats(playbook: Engine) -> None:
    event(playbook, "cited", "pb-2", day=2, success=True)
    event(playbook, "cited", "pb-2", day=3, success=True)
    event(playbook, "cited", "pb-3", day=3, success=False)
    with at(4), transaction(playbook) as session:
        lifecycle.deprecate(session, "pb-3", reason="pr_closed_unmerged", actor="bot")
    with at(5), transaction(playbook) as session:
        report = upkeep.stats(session)
    assert report["bullets"]["by_status"] == {"active": 2, "deprecated": 1}
    assert report["usage"] == {
        "loads": 1,
        "cites": 3,
        "successes": 2,
        "failures": 1,
        "unknown_outcome": 0,
    }
    assert report["cite_rate"] == 3.0
    assert [b["id"] for b in report["most_helpful"]] == ["pb-2"]
    assert report["most_helpful"][0]["confidence"] == pytest.approx(0.757)
    assert [b["id"] for b in report["most_harmful"]] == ["pb-3"]
    assert [(b["id"], b["demoted_reason"]) for b in report["recently_demoted"]] == [
        ("pb-3", "pr_closed_unmerged")
    ]

"""Prune and stats with a controllable clock: every gate and every transition."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import Engine

from playbook import clock, upkeep
from playbook.db import transaction
from playbook.lessons import lifecycle
from playbook.outcomes import usage

T0 = datetime(2026, 1, 1, 9, 0, tzinfo=UTC)


def at(days: float):
    return clock.frozen(T0 + timedelta(days=days))


def add(engine: Engine, text: str, day: float = 0) -> str:
    with at(day), transaction(engine) as session:
        return lifecycle.add(session, text, learned_from="A-1", actor="t").bullet.id


def event(
    engine: Engine,
    kind: str,
    bullet_id: str,
    day: float,
    success: bool | None = None,
    ticket: str = "A-2",
) -> None:
    with at(day), transaction(engine) as session:
        usage.record_once(session, kind, [bullet_id], ticket_key=ticket, success=success)


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


def test_any_use_in_the_window_protects_a_bullet(playbook: Engine) -> None:
    event(playbook, "cited", "pb-1", day=45, success=False)
    event(playbook, "loaded", "pb-2", day=45)
    ids = [c.bullet_id for c in prune(playbook, day=60).candidates]
    assert "pb-1" not in ids and "pb-2" not in ids


@pytest.mark.parametrize(("success", "kept"), [(True, True), (False, False), (None, False)])
def test_an_idle_bullet_is_kept_only_when_its_cites_helped(
    playbook: Engine, success: bool | None, kept: bool
) -> None:
    # Cited before the idle window: the use no longer protects it, its outcome decides.
    event(playbook, "cited", "pb-1", day=5, success=success)
    report = prune(playbook, day=60)
    assert ("pb-1" in [c.bullet_id for c in report.kept]) is kept
    assert ("pb-1" in [c.bullet_id for c in report.candidates]) is not kept


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
    event(playbook, "cited", "pb-2", day=3, success=True, ticket="A-3")
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
        "not_counted": 0,
    }
    # pb-1 was shown on A-2 and never cited there; the cites were of lessons not shown.
    assert report["cite_rate"] == 0.0
    assert report["cite_rate_counts"] == {"loaded": 1, "cited": 0}
    assert [b["id"] for b in report["most_helpful"]] == ["pb-2"]
    assert report["most_helpful"][0]["confidence"] == pytest.approx(0.75)  # (2 + 1) / (2 + 2)
    assert [b["id"] for b in report["most_harmful"]] == ["pb-3"]
    assert report["most_harmful"][0]["confidence"] == pytest.approx(0.333)
    assert [(b["id"], b["demoted_reason"]) for b in report["recently_demoted"]] == [
        ("pb-3", "pr_closed_unmerged")
    ]


def rate(engine: Engine) -> tuple[float | None, dict[str, int]]:
    with transaction(engine) as session:
        report = upkeep.stats(session)
    return report["cite_rate"], report["cite_rate_counts"]


def test_cite_rate_counts_each_lesson_once_per_ticket_and_never_passes_100(
    playbook: Engine,
) -> None:
    # pb-1 was loaded on A-2 by the fixture. Cited there twice, and by a PR of A-2 too:
    # one lesson shown on one ticket and cited on it.
    with transaction(playbook) as session:
        usage.record(session, "cited", ["pb-1"], ticket_key="A-2", success=True)
        usage.record(session, "cited", ["pb-1"], ticket_key="A-2", pr_key="o/r#1")
    assert rate(playbook) == (1.0, {"loaded": 1, "cited": 1})
    # Cites of lessons never shown on their ticket (known from elsewhere) add nothing.
    for ticket in ("A-3", "A-4", "A-5"):
        event(playbook, "cited", "pb-2", day=2, ticket=ticket)
    assert rate(playbook) == (1.0, {"loaded": 1, "cited": 1})
    # Shown again on A-2, and shown on A-6 but not cited: 1 of 2.
    event(playbook, "loaded", "pb-1", day=3)
    event(playbook, "loaded", "pb-1", day=3, ticket="A-6")
    assert rate(playbook) == (0.5, {"loaded": 2, "cited": 1})


def test_no_cite_rate_before_anything_is_shown(engine: Engine) -> None:
    add(engine, "A lesson")
    event(engine, "cited", "pb-1", day=1, success=True)
    assert rate(engine) == (None, {"loaded": 0, "cited": 0})


def rated(engine: Engine, bullet_id: str, merged: int, rejected: int, day: float = 2) -> None:
    with at(day), transaction(engine) as session:
        for n in range(merged + rejected):
            usage.record_once(
                session, "cited", [bullet_id], ticket_key=f"R-{n}", success=n < merged
            )


def test_most_helpful_is_ordered_by_confidence(engine: Engine) -> None:
    for text in ("Twenty merged, ten rejected", "Never cited", "One merged", "Ten rejected"):
        add(engine, text)
    rated(engine, "pb-1", 20, 10)
    rated(engine, "pb-3", 1, 0)
    rated(engine, "pb-4", 0, 10)
    with transaction(engine) as session:
        report = upkeep.stats(session)
    helpful = [(b["id"], b["confidence"]) for b in report["most_helpful"]]
    assert helpful == [("pb-3", 0.667), ("pb-1", 0.656)]  # the unused pb-2 (0.5) is neither
    assert [(b["id"], b["confidence"]) for b in report["most_harmful"]] == [("pb-4", 0.083)]


def test_prune_keeps_idle_lessons_that_help_and_archives_the_rest(engine: Engine) -> None:
    for text in ("Mostly merged", "Mostly rejected", "Even", "Never cited"):
        add(engine, text)
    rated(engine, "pb-1", 20, 10, day=1)
    rated(engine, "pb-2", 1, 3, day=1)
    rated(engine, "pb-3", 2, 2, day=1)
    report = prune(engine, day=60, apply=True)
    assert report.archived == ["pb-2", "pb-3", "pb-4"]
    [kept] = report.kept
    assert (kept.bullet_id, kept.cites_success, kept.cites_failure, kept.confidence) == (
        "pb-1",
        20,
        10,
        0.656,
    )
    assert [c.confidence for c in report.candidates] == [0.333, 0.5, 0.5]
    with transaction(engine) as session:
        assert lifecycle.get(session, "pb-1").status == "active"
        assert lifecycle.get(session, "pb-2").status == "archived"
    text = upkeep.prune_markdown(report)
    assert "Kept 1 idle lesson(s) cited in more merged than rejected work: pb-1" in text
    assert "| pb-2 |" in text


def test_prune_reads_helpfulness_from_the_event_log(engine: Engine) -> None:
    add(engine, "Helped once")
    rated(engine, "pb-1", 1, 0, day=1)
    with transaction(engine) as session:
        lifecycle.get(session, "pb-1").cites_success = 0  # drifted counters
        lifecycle.get(session, "pb-1").cites_failure = 5
    assert [c.bullet_id for c in prune(engine, day=60).kept] == ["pb-1"]

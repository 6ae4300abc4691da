"""The holdout closes the loop: measured-harmful lessons deprecated, measured-helpful kept."""

from __future__ import annotations

from datetime import timedelta

from sqlalchemy import Engine, update

from playbook import clock, db, upkeep
from playbook.experiment import report as experiment
from playbook.lessons import lifecycle
from playbook.models import Bullet, ExperimentAssignment, ExperimentExposure, UsageEvent

LONG_AGO = clock.now() - timedelta(days=120)


def _tickets(session, lesson: str, arm: str, merged: int, total: int, prefix: str) -> None:
    """``total`` experiment tickets of ``arm`` that saw (or would have seen) ``lesson``."""
    for n in range(total):
        key = f"{prefix}-{n + 1}"
        session.add(
            ExperimentAssignment(
                ticket_key=key,
                ticket_ref=key,
                arm=arm,
                percent=50,
                assigned_at=LONG_AGO,
                created_at=LONG_AGO,
                outcome="merged" if n < merged else "closed",
                merged_at=LONG_AGO + timedelta(hours=5) if n < merged else None,
            )
        )
        session.add(
            ExperimentExposure(ticket_key=key, bullet_id=lesson, arm=arm, rank=1, at=LONG_AGO)
        )


def _world(engine: Engine) -> dict[str, str]:
    """A harmful, a helpful and an unmeasured lesson, all idle for months."""
    with db.transaction(engine) as session:
        ids = {
            name: lifecycle.add(session, text, learned_from=f"OLD-{i}", actor="t").bullet.id
            for i, (name, text) in enumerate(
                (
                    ("harmful", "Disable the flaky integration tests to get green builds"),
                    ("helpful", "Run the migration check before merging schema changes"),
                    ("idle", "Prefer small pull requests for the billing service"),
                )
            )
        }
        # Old enough to prune, and the usage log spans past the observation window.
        session.execute(update(Bullet).values(created_at=LONG_AGO, updated_at=LONG_AGO))
        session.add(UsageEvent(kind="loaded", bullet_id=ids["idle"], ts=LONG_AGO, counted=True))
    with db.transaction(engine) as session:
        _tickets(session, ids["harmful"], "shown", merged=5, total=30, prefix="HS")
        _tickets(session, ids["harmful"], "held_out", merged=25, total=30, prefix="HH")
        _tickets(session, ids["helpful"], "shown", merged=27, total=30, prefix="GS")
        _tickets(session, ids["helpful"], "held_out", merged=8, total=30, prefix="GH")
    return ids


def test_dry_run_lists_measured_harmful_first_and_apply_deprecates_it(engine: Engine) -> None:
    ids = _world(engine)
    with db.transaction(engine) as session:
        dry = upkeep.prune(session, effect_min_tickets=20)
    assert [h.bullet_id for h in dry.harmful] == [ids["harmful"]]
    assert dry.harmful[0].ci[1] < 0 and dry.deprecated == []
    markdown = upkeep.prune_markdown(dry)
    assert markdown.index(ids["harmful"]) < markdown.index(ids["idle"])
    assert "Would deprecate 1 lesson(s) the holdout measured as harmful" in markdown
    # Idle for months, but measured helpful: kept; the unmeasured idle one would go.
    assert dry.measured_helpful == [ids["helpful"]]
    assert [c.bullet_id for c in dry.candidates] == [ids["idle"]]
    with db.transaction(engine) as session:
        applied = upkeep.prune(session, apply=True, effect_min_tickets=20, actor="t")
    assert applied.deprecated == [ids["harmful"]]
    with db.transaction(engine) as session:
        harmful = session.get(Bullet, ids["harmful"])
        assert harmful is not None
        assert (harmful.status, harmful.demoted_reason) == ("deprecated", "measured_harmful")
        assert session.get(Bullet, ids["helpful"]).status == "active"  # type: ignore[union-attr]
        assert session.get(Bullet, ids["idle"]).status == "archived"  # type: ignore[union-attr]


def test_stats_name_measured_harmful_lessons_and_respect_the_minimum(engine: Engine) -> None:
    ids = _world(engine)
    with db.transaction(engine) as session:
        report = upkeep.stats(session, effect_min_tickets=20)
        [harm] = report["measured_harmful"]
        assert harm["id"] == ids["harmful"] and harm["ci"][1] < 0
        # Below the minimum on either side, nothing is measured: not enough data.
        assert upkeep.stats(session, effect_min_tickets=31)["measured_harmful"] == []
        assert upkeep.prune(session, effect_min_tickets=31).harmful == []


# Lessons far enough apart that none is a near-duplicate of another.
UNRELATED = (
    "Update the changelog in the same pull request",
    "Keep third-party license notices in the vendor folder",
    "Build the docs locally before editing the navigation",
    "Version the public API schema with every breaking field",
    "Remove feature flags a month after full rollout",
    "Generate test fixtures from a script, not by hand",
)


def test_a_lesson_below_zero_by_chance_among_many_is_not_deprecated(engine: Engine) -> None:
    ids = _world(engine)
    with db.transaction(engine) as session:
        # Six more lessons with no effect, and one whose interval lies below zero by chance
        # alone (18 of 50 against 30 of 50: p = 0.017 on its own, not among 9 lessons).
        others = [
            lifecycle.add(session, text, learned_from=f"AA-{n}", actor="t").bullet.id
            for n, text in enumerate(UNRELATED)
        ]
        assert len(set(others)) == len(UNRELATED)
        unlucky = lifecycle.add(
            session, "Rebase onto main before asking for review", learned_from="AA-9", actor="t"
        ).bullet.id
    with db.transaction(engine) as session:
        for n, lesson in enumerate(others):
            _tickets(session, lesson, "shown", merged=15, total=30, prefix=f"N{n}S")
            _tickets(session, lesson, "held_out", merged=15, total=30, prefix=f"N{n}H")
        _tickets(session, unlucky, "shown", merged=18, total=50, prefix="US")
        _tickets(session, unlucky, "held_out", merged=30, total=50, prefix="UH")
    with db.transaction(engine) as session:
        dry = upkeep.prune(session, effect_min_tickets=20)
        assert [h.bullet_id for h in dry.harmful] == [ids["harmful"]]
        listed = upkeep.stats(session, effect_min_tickets=20)["measured_harmful"]
        assert [harm["id"] for harm in listed] == [ids["harmful"]]
        effect = experiment.lesson_effect(session, unlucky, min_tickets=20)
        assert effect["ci"][1] < 0
        assert effect["verdict"] == (
            "no clear effect: below zero, but not after allowing for the 9 lessons compared"
        )
        applied = upkeep.prune(session, apply=True, effect_min_tickets=20, actor="t")
    assert applied.deprecated == [ids["harmful"]]
    with db.transaction(engine) as session:
        assert session.get(Bullet, unlucky).demoted_reason != "measured_harmful"  # type: ignore[union-attr]

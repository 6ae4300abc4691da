"""The relevance report: each scope's verdicts and fit, and the lessons listed as off-topic."""

from __future__ import annotations

import pytest
from sqlalchemy import Engine

from playbook import db
from playbook.fit import calibration, report
from playbook.fit.calibration import MAX_SHIFT, MIN_LABELS
from playbook.models import FitCalibration
from playbook.scopes import View
from playbook.search.relevance import shifted
from tests.playbook.fit.world import NOW, commented, off_topic_world, reply

FLOOR = 0.03


def test_often_marked_lessons_are_listed_per_scope_by_the_documented_rule(engine: Engine) -> None:
    off_topic_world(engine)
    with db.transaction(engine) as session:
        fits = {fit.scope: fit for fit in report.scope_fits(session, FLOOR)}
    assert sorted(fits) == ["CTMS", "acme/api", "other/web"]
    [listed] = fits["acme/api"].off_topic
    assert (listed.bullet_id, listed.unhelpful, listed.helpful) == ("pb-6", 3, 1)
    assert (listed.people, listed.tickets) == (3, 3)
    assert listed.text == "Compress nightly log archives before upload"
    assert listed.last_reason == "about\nlog shipping, not builds"
    assert [o.bullet_id for o in fits["other/web"].off_topic] == ["pb-4"]
    assert fits["CTMS"].off_topic == []


def test_across_scopes_a_lesson_missing_a_little_in_each_is_listed(engine: Engine) -> None:
    off_topic_world(engine)
    with db.transaction(engine) as session:
        overall = {o.bullet_id: o for o in report.off_topic(session)}
    assert sorted(overall) == ["pb-1", "pb-4", "pb-6"]
    assert (overall["pb-1"].unhelpful, overall["pb-1"].people, overall["pb-1"].tickets) == (3, 3, 3)


def test_a_scoped_view_reads_only_its_own_scopes_verdicts(engine: Engine) -> None:
    off_topic_world(engine)
    view = View(scope="acme/api")
    with db.transaction(engine) as session:
        fits = report.scope_fits(session, FLOOR, view)
        assert [fit.scope for fit in fits] == ["acme/api"]
        assert [o.bullet_id for o in report.off_topic(session, view)] == ["pb-6"]
        # Asking for another scope's verdicts gets nothing of them.
        assert report.scope_fits(session, FLOOR, view, scope="other/web") == []
        assert report.off_topic(session, view, scope="CTMS") == []


def test_counts_and_the_way_to_a_fit(engine: Engine) -> None:
    off_topic_world(engine)
    with db.transaction(engine) as session:
        [fit] = report.scope_fits(session, FLOOR, scope="acme/api")
    assert (fit.labels, fit.helpful, fit.unhelpful) == (17, 3, 14)
    # The fit reads the verdicts on lessons the bot showed; a reply replaces a reaction.
    assert fit.used == 16
    assert (fit.shift, fit.needed, fit.raw_floor) == (None, MIN_LABELS - 16, FLOOR)
    assert fit.in_words() == (
        f"the packaged model as is: 16 of {MIN_LABELS} verdicts on lessons the bot showed, "
        f"{MIN_LABELS - 16} more to go"
    )


def test_a_scope_asked_for_without_verdicts_is_at_the_packaged_model(engine: Engine) -> None:
    with db.transaction(engine) as session:
        [fit] = report.scope_fits(session, FLOOR, scope="acme/web")
    assert (fit.scope, fit.labels, fit.shift, fit.needed) == ("acme/web", 0, None, MIN_LABELS)


@pytest.mark.parametrize(
    ("shift", "words"),
    [
        (-0.7, "estimates read 2x lower in odds (log-odds -0.70)"),
        (MAX_SHIFT, "estimates read 4x higher in odds (log-odds +1.39) (at the bound)"),
        (0.001, "fitted: the packaged model's level fits this scope (no shift)"),
    ],
)
def test_a_fitted_shift_in_words_and_the_floor_it_implies(
    engine: Engine, shift: float, words: str
) -> None:
    with db.transaction(engine) as session:
        session.add(FitCalibration(scope="CTMS", labels=80, helpful=9, shift=shift, fitted_at=NOW))
    with db.transaction(engine) as session:
        [fit] = report.scope_fits(session, FLOOR, scope="CTMS")
    assert fit.in_words().endswith(words)
    # The floor in the packaged estimate's terms: the comment floor moved by -shift in log-odds.
    assert fit.raw_floor == pytest.approx(shifted(FLOOR, -shift))
    assert shifted(fit.raw_floor, shift) == pytest.approx(FLOOR)
    assert (fit.raw_floor > FLOOR) == (shift < 0)


def test_the_report_follows_a_refit(engine: Engine) -> None:
    ids = off_topic_world(engine)
    for n in range(MIN_LABELS):
        commented(engine, f"CTMS-{100 + n}", [(ids[0], 0.02)], target="jira")
        reply(engine, f"CTMS-{100 + n}", ids[0], n % 4 == 0, f"p{n % 5}", target="jira")
    with db.transaction(engine) as session:
        calibration.refit_all(session)
    with db.transaction(engine) as session:
        answer = report.as_dict(session, FLOOR, scope="CTMS")
    [fit] = answer["scopes"]
    assert fit["fitted"] and fit["needed"] == 0 and fit["shift"] > 1.0
    assert fit["raw_floor"] < FLOOR
    assert answer["off_topic_rule"] == {"unhelpful": 3, "people": 2, "tickets": 2, "share": 0.6667}


def test_stats_list_the_lessons_often_marked_as_not_fitting(engine: Engine, cli) -> None:
    from playbook import upkeep
    from playbook.scopes import View

    off_topic_world(engine)
    with db.transaction(engine) as session:
        everything = upkeep.stats(session)["off_topic"]
        scoped = upkeep.stats(session, view=View(scope="other/web"))["off_topic"]
    listed = {row["id"] for row in everything}
    assert {"pb-6", "pb-4", "pb-1"} <= listed and "pb-2" not in listed and "pb-3" not in listed
    # A scoped reader sees its own scope's verdicts only: no acme/api lesson.
    assert "pb-6" not in {row["id"] for row in scoped}
    text = cli("stats").stdout
    assert "often marked as not fitting" in text and "pb-6 -3/+1 by 3 people on 3 tickets" in text
    # The lesson itself is untouched: still active, confidence and cites as before.
    shown = cli("show", "pb-6", "--json")
    assert '"status": "active"' in shown.stdout

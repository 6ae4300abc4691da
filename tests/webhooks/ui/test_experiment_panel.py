"""The holdout experiment on the web page: the panel of /ui/stats and a lesson's measured effect."""

from __future__ import annotations

import html
import re
from typing import Any

import pytest
from sqlalchemy import Engine

from playbook.db import transaction
from playbook.experiment import assignment
from tests import holdout_world
from tests.holdout_world import FIRST_DAY, HARMFUL, STARTED


@pytest.fixture
def page(shared_app: Any) -> Any:
    """A test client of the page, readable without a login, with a minimum of 5 tickets (one
    app for the module: its tests only send requests)."""
    changes = {"ui_public_read": True, "effect_min_tickets": holdout_world.MIN_TICKETS}
    return shared_app(**changes).test_client()


def panel(client: Any) -> str:
    """The text of the stats page's experiment panel, tags dropped and spaces collapsed."""
    answer = client.get("/ui/stats")
    assert answer.status_code == 200, answer.text
    assert "<script" not in answer.text
    found = re.search(r'<section class="card experiment".*?</section>', answer.text, re.S)
    assert found, "no experiment panel on /ui/stats"
    return found.group(0)


def text(markup: str) -> str:
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", markup)).split())


def test_the_panel_shows_both_arms_the_verdict_and_the_harmful_lesson(
    seeded: Engine, page: Any
) -> None:
    holdout_world.build(seeded)
    markup = panel(page)
    said = text(markup)
    assert "Holdout experiment" in said
    assert "Running: 20% of new tickets are held out" in said
    assert "Shown lessons 30 29 20 69% (95% CI" in said
    assert "Held out 10 10 9 90% (95% CI" in said
    assert "Difference (shown minus held out): -21 points (95% CI" in said
    assert "Tickets shown lessons merged 21 points less often than tickets held out" in said
    assert "for 5 points" in said
    assert "for 10 points" in said
    harmful = re.search(r'<ul class="plain-list harmful">.*?</ul>', markup, re.S)
    assert harmful, markup
    assert f'href="/ui/lessons/{HARMFUL}"' in harmful.group(0)
    assert "Pin chromium in CI for screenshots" in harmful.group(0)
    assert "Warning" not in said


def test_a_sample_ratio_mismatch_is_shown_before_any_number(engine: Engine, page: Any) -> None:
    with transaction(engine) as session:
        assignment.start(session, 10, STARTED, "cli:tester")
        for n in range(60):
            arm = "held_out" if n % 2 else "shown"
            holdout_world.ticket(session, f"M-{n}", arm, "merged", at=FIRST_DAY, percent=10)
    said = text(panel(page))
    warning = said.index("Warning: Sample ratio mismatch")
    assert warning < said.index("Shown lessons 30")
    assert said.count("Sample ratio mismatch") == 1


def test_the_panel_says_when_no_experiment_runs(engine: Engine, page: Any) -> None:
    said = text(panel(page))
    assert "Not running: every ticket gets lessons" in said
    assert "Shown lessons 0 0 0 —" in said
    with transaction(engine) as session:
        assignment.start(session, 15, STARTED, "cli:tester")
        assignment.stop(session, FIRST_DAY, "cli:tester")
    assert "Not running. It last held out 15% of new tickets, from 2026-03-01 09:00 UTC" in text(
        panel(page)
    )


def test_the_lesson_page_shows_its_measured_effect(seeded: Engine, page: Any) -> None:
    holdout_world.build(seeded)
    answer = page.get(f"/ui/lessons/{HARMFUL}")
    assert answer.status_code == 200, answer.text
    said = effect_of(answer.text)
    assert said.startswith("Measured effect measured harmful : -80 points (95% CI")
    assert "shown on 10 tickets, 10 with an outcome, 1 merged" in said
    assert "held out from 10 tickets, 10 with an outcome, 9 merged" in said
    quiet = effect_of(page.get("/ui/lessons/pb-2").text)
    assert quiet.startswith("Measured effect not enough data")
    assert "5 tickets with an outcome are needed on each side" in quiet


def effect_of(page: str) -> str:
    """The text of a lesson page's measured effect."""
    found = re.search(r'<div class="measured-effect">.*?</dd></div>', page, re.S)
    assert found, "no measured effect on the lesson page"
    return text(found.group(0))

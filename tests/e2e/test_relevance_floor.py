"""The bot speaks only when a lesson fits: abstention, fewer lessons, edits judged again."""

from __future__ import annotations

import copy
import json
import re
from typing import Any

import pytest
from sqlalchemy import Engine, select

from bot.config import Settings
from playbook.db import transaction
from playbook.lessons import lifecycle
from playbook.models import ExperimentExposure, Retrieval
from playbook.search import relevance
from playbook.search.floor import default_min_relevance
from tests.loop_harness import Loop, start_loop
from tests.payloads import fixture

KEY = "CTMS-4337"
COMMENTS = f"/rest/api/2/issue/{KEY}/comment"
LESSONS = (
    ("Payment webhooks are retried by the provider: dedupe on the event id", "CTMS-3012"),
    ("Take the orders row lock once per transaction; a second one deadlocks", "CTMS-3250"),
    ("Product image cache is purged through the CDN purge API, not by renaming", "CTMS-2990"),
    ("Checkout totals are computed in cents as integers; floats drift", "CTMS-2877"),
    ("Feature flags for checkout live in LaunchDarkly; default them off in tests", "CTMS-3105"),
    ("Retry the order confirmation email with backoff; the mail API rate-limits", "CTMS-3320"),
    ("Run database migrations before deploying workers that read new columns", "CTMS-3330"),
    ("Flaky end-to-end tests: wait for the network to be idle, not fixed sleeps", "CTMS-3340"),
)
UNRELATED = (
    "Add a dark mode toggle to the settings page",
    "Designers asked for a dark theme in the account settings; keep the contrast accessible.",
)
FITTING = (
    "Payment webhook retries deadlock on the orders row",
    "The provider retries the payment webhook; the retry handler takes the orders row lock in "
    "a second transaction and deadlocks. Dedupe on the event id.",
)


def seed(engine: Engine) -> None:
    """A small CTMS playbook: a few lessons about payments, the rest about other things."""
    with transaction(engine) as session:
        for text, learned_from in LESSONS:
            lifecycle.add(session, text, learned_from=learned_from, scope="CTMS", actor="seed")


def issue(event: str, summary: str, description: str) -> dict[str, Any]:
    """A Jira issue event about KEY with this text and no labels."""
    name = "jira.issue_created" if event == "created" else "jira.issue_updated"
    payload = copy.deepcopy(fixture(name))
    fields = payload["issue"]["fields"]
    fields.update(summary=summary, description=description, labels=[])
    return payload


def bodies(loop: Loop) -> list[str]:
    """Every comment text the bot sent about KEY, posts and edits, in order."""
    calls = loop.jira.calls("POST", COMMENTS) + [
        c for c in loop.jira.calls("PUT") if f"/issue/{KEY}/comment/" in c.path
    ]
    return [c.json["body"] for c in calls]


def decisions(engine: Engine) -> list[bool | None]:
    with transaction(engine) as session:
        return list(
            session.scalars(
                select(Retrieval.spoke).where(Retrieval.ticket_key == KEY).order_by(Retrieval.id)
            )
        )


def test_the_default_floor_is_the_one_the_packaged_model_was_fitted_with() -> None:
    model = relevance.default_model()
    assert Settings(_env_file=None).min_relevance == pytest.approx(model.floor)
    assert default_min_relevance() == pytest.approx(model.floor)
    assert 0 < model.lesson_ratio <= 1


def test_silent_then_a_comment_once_an_edit_fits_then_edited_to_say_none_fits(loop: Loop) -> None:
    seed(loop.engine)
    loop.jira.add_issue(KEY, UNRELATED[0])
    loop.jira_event(issue("created", *UNRELATED))
    loop.process()
    assert loop.jira.calls("POST") == []  # nothing fits a dark-mode ticket: no comment at all
    assert decisions(loop.engine) == [False]

    loop.jira_event(issue("updated", *FITTING))
    loop.process()
    [post] = loop.jira.calls("POST", COMMENTS)
    body = post.json["body"]
    assert "\\[pb-1\\]" in body and "\\[pb-2\\]" in body
    assert "pb-3" not in body and "CDN" not in body  # the image cache does not fit a payment
    assert len(re.findall(r"^\* \*\\\[pb-", body, re.MULTILINE)) < 5  # fewer than max_lessons
    # Each lesson says why it is there in words and the ticket's own words, never a number.
    reasons = [line for line in body.splitlines() if line.startswith("** _")]
    assert reasons and all(re.search(r"(strong|possible) fit: matched ", r) for r in reasons)
    assert not any(re.search(r"0\.\d", r) for r in reasons)
    assert "deadlock" in body.split("\\[pb-2\\]")[1].split("\n*")[0]

    loop.jira_event(issue("updated", *UNRELATED))
    loop.process()
    assert len(loop.jira.calls("POST", COMMENTS)) == 1  # still one comment, edited
    assert bodies(loop)[-1].endswith("No lesson in the playbook fits this ticket any more.")
    assert len(loop.jira.comments[KEY]) == 1
    assert decisions(loop.engine) == [False, True, False]


def test_stats_count_the_tickets_commented_on_and_those_left_alone(loop: Loop, cli) -> None:
    seed(loop.engine)
    loop.jira.add_issue(KEY, UNRELATED[0])
    loop.jira.add_issue("CTMS-4338", FITTING[0])
    loop.jira_event(issue("created", *UNRELATED))
    loop.process()
    other = issue("created", *FITTING)
    other["issue"]["key"] = "CTMS-4338"
    other["issue"]["id"] = "10099"
    loop.jira_event(other)
    loop.process()
    answer = cli("stats", "--json")
    assert answer.exit_code == 0, answer.output
    spoke = json.loads(answer.stdout)["comments"]
    assert spoke == {"tickets": 2, "posted": 1, "abstained": 1, "share_posted": 0.5}
    text = cli("stats").stdout
    assert "comments: posted on 1 of 2 tickets (50%); kept quiet on 1" in text


@pytest.fixture
def loud(engine: Engine, database_url: str):
    """The bot with the floor at 0: every ticket a lesson matches gets a comment, as before."""
    running = start_loop(engine, database_url, PLAYBOOK_MIN_RELEVANCE=0)
    yield running
    running.github.stop()
    running.jira.stop()


def test_a_floor_of_zero_comments_on_every_ticket_a_lesson_matches(loud: Loop) -> None:
    seed(loud.engine)
    loud.jira.add_issue(KEY, "Dark mode")
    loud.jira_event(issue("created", "Dark mode for the checkout settings page", "Add a toggle."))
    loud.process()
    [post] = loud.jira.calls("POST", COMMENTS)
    assert "weak fit" not in post.json["body"]


@pytest.fixture
def noting(engine: Engine, database_url: str):
    """The bot asked to say so when nothing fits."""
    running = start_loop(engine, database_url, PLAYBOOK_SAY_NOTHING_FITS=True)
    yield running
    running.github.stop()
    running.jira.stop()


def test_say_nothing_fits_posts_one_line_instead_of_silence(noting: Loop) -> None:
    seed(noting.engine)
    noting.jira.add_issue(KEY, UNRELATED[0])
    noting.jira_event(issue("created", *UNRELATED))
    noting.process()
    [post] = noting.jira.calls("POST", COMMENTS)
    assert post.json["body"].endswith("Nothing in the playbook fits this ticket yet.")
    assert "pb-" not in post.json["body"]


@pytest.fixture
def holdout_all(engine: Engine, database_url: str):
    """Every new ticket held out (the experiment at its largest share, and a salt that holds
    this ticket out)."""
    running = start_loop(
        engine, database_url, PLAYBOOK_HOLDOUT_PERCENT=50, PLAYBOOK_EXPERIMENT_SALT="floor-test"
    )
    yield running
    running.github.stop()
    running.jira.stop()


def test_the_holdouts_would_have_shown_set_uses_the_same_floor(holdout_all: Loop) -> None:
    loop = holdout_all
    seed(loop.engine)
    keys = [f"CTMS-{5000 + i}" for i in range(12)]
    for i, key in enumerate(keys):
        loop.jira.add_issue(key, FITTING[0])
        payload = issue("created", *FITTING)
        payload["issue"]["key"], payload["issue"]["id"] = key, str(20000 + i)
        loop.jira_event(payload)
    loop.process()
    with transaction(loop.engine) as session:
        exposures = session.scalars(select(ExperimentExposure)).all()
    held = {e.bullet_id for e in exposures if e.arm == "held_out"}
    shown = {e.bullet_id for e in exposures if e.arm == "shown"}
    assert held and shown  # both arms on the same text
    assert held == shown  # the same lessons: what a comment shows, not all five matches
    assert "pb-3" not in held

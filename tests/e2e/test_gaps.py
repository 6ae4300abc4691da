"""Gaps through the whole bot: ticket deliveries keep their text, and recurring ones show up."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from sqlalchemy import Engine, select

from playbook.db import transaction
from playbook.models import Retrieval
from tests.e2e.test_holdout import PERCENT, SALT, numbers, opened
from tests.e2e.test_loop import seed
from tests.loop_harness import REPO, Loop, start_loop
from tests.payloads import fixture

MAINTAINER = {"Authorization": "Bearer maintainer-token"}
RENAMES = (
    "Status badge broken after renaming the default branch to main",
    "Badges in the README show unknown since the branch rename",
    "CI status badge points at the old master branch after the rename",
)


@pytest.fixture
def gaps_loop(engine: Engine, database_url: str) -> Iterator[Loop]:
    """The whole bot with the holdout at 50% under a known salt, and the API open."""
    running = start_loop(
        engine,
        database_url,
        PLAYBOOK_HOLDOUT_PERCENT=PERCENT,
        PLAYBOOK_EXPERIMENT_SALT=SALT,
        PLAYBOOK_API_TOKEN="maintainer-token",
    )
    yield running
    running.github.stop()
    running.jira.stop()


def searches(engine: Engine, ticket: str) -> list[tuple[str, list[str], str | None, str | None]]:
    """(rank_by, lessons shown, title, text) of each search logged for a ticket."""
    with transaction(engine) as session:
        rows = session.execute(
            select(Retrieval.rank_by, Retrieval.bullet_ids, Retrieval.title, Retrieval.text)
            .where(Retrieval.ticket_key == ticket)
            .order_by(Retrieval.id)
        )
        return [tuple(row) for row in rows]  # type: ignore[misc]


def test_a_jira_ticket_without_lessons_keeps_its_summary_and_searched_text(loop: Loop) -> None:
    seed(loop.engine, ("Cache invalidation goes through the CDN purge API", "CTMS-1", "CTMS"))
    loop.jira_event(fixture("jira.issue_created"))
    loop.process()
    [(rank_by, shown, title, text)] = searches(loop.engine, "CTMS-4337")
    assert (rank_by, shown) == ("feedback", [])
    assert title == "Checkout times out when the payment webhook retries"
    assert text is not None
    assert text.startswith(f"{title}\nWhen Stripe retries the payment_intent.succeeded webhook")
    assert text.endswith("\npayments webhooks deadlock")  # the labels, as searched


def test_a_github_issue_shown_lessons_keeps_its_text_too(loop: Loop) -> None:
    seed(loop.engine, ("Spelling errors in the README: run codespell in CI", "x/y#1", REPO))
    loop.github.add_issue(REPO, 1, "Spelling error in the README file")
    loop.github_event("issues.opened", fixture("issues.opened"))
    loop.process()
    [(_, shown, title, text)] = searches(loop.engine, f"{REPO}#1")
    assert shown == ["pb-1"]
    assert title == "Spelling error in the README file"
    assert text == (
        "Spelling error in the README file\n"
        "It looks like you accidently spelled 'commit' with two 't's.\nbug"
    )


def test_recurring_issues_without_a_lesson_are_a_gap_held_out_ones_included(
    gaps_loop: Loop,
) -> None:
    loop = gaps_loop
    # Any shared word makes a lesson fit: this one shares none with the renames.
    seed(loop.engine, ("Spelling errors in the README file: run codespell", "x/y#1", REPO))
    shown = numbers("shown", 2)
    [held, held_with_lesson] = numbers("held_out", 2)
    for number, title in zip([*shown, held], RENAMES, strict=True):
        loop.github.add_issue(REPO, number, title)
        payload = opened(number, title)
        payload["issue"]["body"] = "The badge at the top of the README is grey."
        loop.github_event("issues.opened", payload)
    # Held out from a lesson that fits it: covered, not a gap.
    loop.github.add_issue(REPO, held_with_lesson, "Spelling error in the README file")
    loop.github_event("issues.opened", opened(held_with_lesson))
    loop.process()
    assert loop.github.comments_on(REPO, held_with_lesson) == []
    [(rank_by, shown_ids, title, _)] = searches(loop.engine, f"{REPO}#{held}")
    assert (rank_by, shown_ids, title) == ("held_out", [], RENAMES[2])

    answer = loop.client.get("/api/v1/gaps?min=3", headers=MAINTAINER)
    assert answer.status_code == 200, answer.text
    body = answer.get_json()
    assert body["without_lessons"] == 3
    [gap] = body["gaps"]
    # Oldest first (in the order the worker took the deliveries).
    assert {t["key"] for t in gap["tickets"]} == {f"{REPO}#{n}" for n in [*shown, held]}
    assert [t["first_seen"] for t in gap["tickets"]] == sorted(
        t["first_seen"] for t in gap["tickets"]
    )
    web = loop.settings.github_web_url.rstrip("/")
    urls = {t["key"]: t["url"] for t in gap["tickets"]}
    assert urls[f"{REPO}#{held}"] == f"{web}/{REPO}/issues/{held}"
    assert {"badge", "branch", "rename"} <= set(gap["words"])
    # Coverage still counts only the tickets that could have been shown lessons.
    stats = loop.client.get("/api/v1/stats", headers=MAINTAINER).get_json()
    assert stats["coverage"]["tickets"] == 2

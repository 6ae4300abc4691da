"""Lesson ids cited after a PR opened: in a review, a review comment or a commit message of
the PR count as cites for the PR and its first ticket, once each."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Engine, select

from playbook.db import transaction
from playbook.lessons import lifecycle
from playbook.models import SideEffect, UsageEvent
from tests.loop_harness import REPO, Loop
from tests.payloads import pull_request, pull_request_review
from tests.support import last_delivery


def _lesson(engine: Engine, text: str = "Dedupe payment webhooks") -> str:
    with transaction(engine) as session:
        return lifecycle.add(session, text, learned_from="CTMS-1", actor="seed").bullet.id


def _opened(loop: Loop, body: str = "Fixes CTMS-4337.") -> dict[str, Any]:
    opened = pull_request("opened", body=body)
    loop.github_event("pull_request.opened", opened)
    return opened


def _cites(engine: Engine) -> list[tuple[str, str | None, str | None, str | None]]:
    with transaction(engine) as session:
        return [
            (e.bullet_id, e.ticket_key, e.pr_key, e.phase)
            for e in session.scalars(select(UsageEvent).where(UsageEvent.kind == "cited"))
        ]


def test_a_review_citing_a_lesson_is_a_cite_on_the_pr_and_its_ticket(loop: Loop) -> None:
    lesson = _lesson(loop.engine)
    opened = _opened(loop)
    loop.github_event(
        "pull_request_review.submitted", pull_request_review(opened, f"Good use of [{lesson}].")
    )
    loop.process()
    pr = f"{REPO}#{opened['pull_request']['number']}"
    assert [(c[0], c[1], c[2]) for c in _cites(loop.engine)] == [(lesson, "CTMS-4337", pr)]
    assert last_delivery(loop.engine, "pull_request_review").status == "done"


def test_a_review_comment_cites_too_and_a_review_without_ids_is_ignored(loop: Loop) -> None:
    lesson = _lesson(loop.engine)
    opened = _opened(loop)
    loop.github_event(
        "pull_request_review.submitted", pull_request_review(opened, "Looks good to me")
    )
    loop.process()
    review = last_delivery(loop.engine, "pull_request_review")
    assert (review.status, review.reason) == ("ignored", "no known lesson id in the review")
    loop.github_event(
        "pull_request_review_comment.created",
        pull_request_review(opened, f"see {lesson}", comment=True),
    )
    loop.process()
    assert [c[0] for c in _cites(loop.engine)] == [lesson]
    # An id that names no lesson is no cite.
    loop.github_event("pull_request_review.submitted", pull_request_review(opened, "like pb-999"))
    loop.process()
    assert len(_cites(loop.engine)) == 1


def test_lesson_ids_in_commit_messages_are_cites_when_commits_are_pushed(loop: Loop) -> None:
    lesson = _lesson(loop.engine)
    other = _lesson(loop.engine, "Never hold a database lock across an HTTP call")
    opened = _opened(loop, "Fixes CTMS-4337, no lessons named here.")
    number = opened["pull_request"]["number"]
    loop.github.pull_commits[(REPO, number)] = [
        f"Retry with an idempotency key ({lesson})",
        "Fix typo",
        f"Release the lock first, per {other.upper()}",
    ]
    pushed = pull_request("synchronize", body="Fixes CTMS-4337, no lessons named here.")
    loop.github_event("pull_request.synchronize", pushed)
    loop.process()
    cites = _cites(loop.engine)
    assert sorted(c[0] for c in cites) == sorted([lesson, other])
    assert {c[2] for c in cites} == {f"{REPO}#{number}"}
    assert {c[3] for c in cites} == {"commit"}
    with transaction(loop.engine) as session:
        reads = session.scalars(select(SideEffect).where(SideEffect.action == "read_commits"))
        assert [effect.status for effect in reads] == ["done"]
    # Pushed again with the same commits: the cites are not counted twice.
    loop.github_event("pull_request.synchronize", pushed)
    loop.process()
    with transaction(loop.engine) as session:
        assert lifecycle.get(session, lesson).cites == 1

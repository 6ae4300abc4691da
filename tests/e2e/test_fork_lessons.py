"""A Lessons section by an author without write access stays proposed until a maintainer approves.

The whole bot against the fake GitHub: a fork's contributor opens a PR whose Lessons section
would reach every agent's AGENTS.md, a maintainer merges it (having reviewed the code, not the
lesson), and the next sync runs. The author's access is asked of GitHub's permission API; the
payload's ``author_association`` and head repository are never taken for it.
"""

from __future__ import annotations

import copy
from typing import Any

from sqlalchemy import Engine

from playbook.db import transaction
from playbook.lessons import lifecycle
from playbook.models import Bullet
from playbook.outcomes import unreviewed
from playbook.outcomes.pull_outcome import DEMOTED_REVERTED, LessonFacts, Move, judge
from playbook.outcomes.reverts import RevertedLesson, judge_unreverted
from tests.bot.agents_md_world import world_for
from tests.loop_harness import Loop
from tests.payloads import REPO, issue_comment, pull_request

LESSON = "Webhook retries: dedupe on the delivery id before touching the order"
BODY = f"Fixes #1.\n\n## Lessons\n- {LESSON}\n"
MAINTAINER = {"login": "Codertocat", "type": "User"}  # write access in the loop harness
OUTSIDER = {"login": "drive-by", "type": "User"}


def fork_pull(action: str, author: dict[str, Any], **options: Any) -> dict[str, Any]:
    """A PR from ``author``'s fork, saying of itself what a lying or stale payload could."""
    payload = pull_request(
        action, title="Dedupe webhook retries", body=BODY, author=author, **options
    )
    head = payload["pull_request"]["head"]
    head["repo"] = copy.deepcopy(head["repo"])
    head["repo"].update(full_name=f"{author['login']}/Hello-World", fork=True)
    # GitHub computes it, but it says nothing about write access: never an answer.
    payload["pull_request"]["author_association"] = "MEMBER"
    return payload


def merge(loop: Loop, author: dict[str, Any]) -> None:
    """The author opens the PR; a maintainer merges it."""
    loop.github_event("pull_request.opened", fork_pull("opened", author))
    merged = fork_pull("closed", author, merged=True, at="2026-11-05T10:00:00Z", sender=MAINTAINER)
    merged["pull_request"]["merged_by"] = MAINTAINER
    loop.github_event("pull_request.closed", merged)
    loop.process()


def captured(engine: Engine) -> Bullet:
    with transaction(engine) as session:
        bullet = session.query(Bullet).filter(Bullet.text == LESSON).one()
        session.expunge(bullet)
        return bullet


def test_a_read_only_authors_lesson_stays_proposed_after_the_merge_and_the_sync(
    loop: Loop,
) -> None:
    loop.github.permissions[(REPO, "drive-by")] = "read"
    world = world_for(loop)
    merge(loop, OUTSIDER)
    lesson = captured(loop.engine)
    assert lesson.status == "proposed"
    # GitHub was asked about the author, whatever the payload claimed.
    assert loop.github.calls("GET", f"/repos/{REPO}/collaborators/drive-by/permission")
    with transaction(loop.engine) as session:
        created, *later = lifecycle.history(session, lesson.id)
    assert created.reason is not None and created.reason.endswith(unreviewed.MARK)
    assert "drive-by" in created.reason
    assert later == []  # the merge moved nothing

    world.sync()
    assert LESSON not in (world.on_branch() or b"").decode()

    # A maintainer reads it and approves: from then on it is an ordinary lesson.
    loop.github.add_issue(REPO, 1, "Retries")
    loop.github_event(
        "issue_comment.created", issue_comment(f"/playbook approve {lesson.id}", "Codertocat")
    )
    loop.process()
    assert captured(loop.engine).status == "active"
    world.sync()
    assert LESSON in (world.on_branch() or b"").decode()


def test_a_writers_lesson_becomes_active_when_the_pr_merges(loop: Loop) -> None:
    loop.github.permissions[(REPO, "drive-by")] = "write"
    merge(loop, OUTSIDER)
    assert captured(loop.engine).status == "active"


def test_without_an_answer_from_github_the_lesson_waits_for_a_maintainer(loop: Loop) -> None:
    # No permission recorded: the fake answers "none", as GitHub does for a stranger.
    merge(loop, {"login": "stranger", "type": "User"})
    assert captured(loop.engine).status == "proposed"


def test_no_outcome_activates_a_lesson_that_awaits_a_maintainer() -> None:
    waiting = {"awaits_maintainer": True}
    proposed = LessonFacts("pb-1", "o/r#1", "proposed", **waiting)
    demoted = LessonFacts("pb-1", "o/r#1", "deprecated", "pr_closed_unmerged", **waiting)
    for lesson in (proposed, demoted):
        verdict = judge(lesson, merged=True, demote=True)
        assert (verdict.move, verdict.why) == (Move.KEEP, unreviewed.WAITS)
    # Closing unmerged may still demote it: that never puts words in front of an agent.
    assert judge(proposed, merged=False, demote=True).move is Move.DEPRECATE
    reverted = RevertedLesson("pb-1", "deprecated", f"{DEMOTED_REVERTED}o/r#3)", **waiting)
    assert judge_unreverted(reverted, "o/r#3").move is not Move.RESTORE


def test_a_persons_approval_ends_the_wait_and_the_bots_own_moves_do_not(engine: Engine) -> None:
    with transaction(engine) as session:
        bullet = lifecycle.add(
            session,
            LESSON,
            learned_from="o/r#1",
            actor="playbook-bot",
            status="proposed",
            source="pr_body",
            reason=unreviewed.capture_reason("Lessons section of o/r#2", "drive-by"),
        ).bullet
        assert unreviewed.awaits_maintainer(session, bullet.id, "playbook-bot")
        # A login that merely starts like the bot's name is a person, as any other.
        lifecycle.deprecate(session, bullet.id, reason="x", actor="playbook-bot (o/r#2 closed)")
        assert unreviewed.awaits_maintainer(session, bullet.id, "playbook-bot")
        lifecycle.restore(session, bullet.id, actor="playbook-bot-fan (comment)")
        assert not unreviewed.awaits_maintainer(session, bullet.id, "playbook-bot")

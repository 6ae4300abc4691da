"""The loop end to end: deliveries through the endpoint and worker, real clients, fake servers."""

from __future__ import annotations

import copy
from typing import Any

from sqlalchemy import Engine, select

from playbook.db import transaction
from playbook.lessons import lifecycle
from playbook.models import SideEffect, UsageEvent
from playbook.outcomes import usage
from tests.loop_harness import INSTALLATION, REPO, Loop
from tests.payloads import fixture, issue_comment, jira_comment_created, pull_request

PR_URL = f"https://github.com/{REPO}/pull/2"


def seed(engine: Engine, *lessons: tuple[str, str, str]) -> None:
    """Add active bullets given as (text, learned_from, scope)."""
    with transaction(engine) as session:
        for text, learned_from, scope in lessons:
            lifecycle.add(session, text, learned_from=learned_from, scope=scope, actor="seed")


def bullet(engine: Engine, bullet_id: str):
    with transaction(engine) as session:
        return lifecycle.get(session, bullet_id)


PAYMENT_LESSONS = (
    ("Payment webhook retries must be idempotent: dedupe on the event id", "CTMS-4001", "CTMS"),
    (
        "Take the orders row lock once; a retry handler opening a second transaction deadlocks",
        "CTMS-4100",
        "CTMS",
    ),
    ("Cache invalidation for product images goes through the CDN purge API", "CTMS-3900", "CTMS"),
    ("Deadlock on the orders row: check lock ordering in the retry handler", "OPS-7", "OPS"),
)


# --- 1 and 2: new and edited tickets --------------------------------------------------------


def test_new_jira_ticket_gets_one_wiki_comment_and_loads(loop: Loop) -> None:
    seed(loop.engine, *PAYMENT_LESSONS)
    loop.jira.add_issue("CTMS-4337", "Checkout times out when the payment webhook retries")
    assert loop.jira_event(fixture("jira.issue_created")).status_code == 202
    assert loop.process() == 1
    [post] = loop.jira.calls("POST", "/rest/api/2/issue/CTMS-4337/comment")
    body = post.json["body"]
    assert body.startswith("h4. Lessons from the playbook")
    assert "\\[pb-1\\]" in body and "\\[pb-2\\]" in body
    assert "learned from CTMS\\-4001, not cited yet" in body
    assert "pb-4" not in body  # OPS is another project's scope
    assert "pb-3" not in body  # nothing in the ticket is about caches
    assert len(body) <= loop.settings.comment_max_chars
    with transaction(loop.engine) as session:
        loads = session.scalars(select(UsageEvent).where(UsageEvent.kind == "loaded")).all()
    assert {(e.bullet_id, e.ticket_key) for e in loads} == {
        ("pb-1", "CTMS-4337"),
        ("pb-2", "CTMS-4337"),
    }
    assert bullet(loop.engine, "pb-1").loads == 1


def test_ticket_without_matching_lessons_gets_no_comment(loop: Loop) -> None:
    seed(loop.engine, ("Cache invalidation goes through the CDN purge API", "CTMS-1", "CTMS"))
    loop.jira_event(fixture("jira.issue_created"))
    loop.process()
    assert loop.jira.calls("POST") == []


def test_edits_edit_the_one_comment_also_when_delivered_twice(loop: Loop) -> None:
    seed(loop.engine, *PAYMENT_LESSONS)
    loop.jira.add_issue("CTMS-4337", "Checkout times out when the payment webhook retries")
    loop.jira_event(fixture("jira.issue_created"))
    loop.process()
    seed(
        loop.engine,
        (
            "Payment webhook retries deadlock on the orders row: reuse its transaction",
            "CTMS-4200",
            "CTMS",
        ),
    )
    updated = fixture("jira.issue_updated")
    loop.jira_event(updated, delivery="upd-1")
    loop.jira_event(updated, delivery="upd-1")  # Jira retried
    loop.jira_event(updated, delivery="upd-2")  # or sent it again under a new id
    loop.process()
    assert len(loop.jira.calls("POST", "/rest/api/2/issue/CTMS-4337/comment")) == 1
    [edit] = loop.jira.calls("PUT")
    assert "\\[pb-5\\]" in edit.json["body"]
    assert len(loop.jira.comments["CTMS-4337"]) == 1
    assert bullet(loop.engine, "pb-1").loads == 1  # shown again, not loaded again
    assert bullet(loop.engine, "pb-5").loads == 1


def test_unrelated_jira_update_changes_nothing(loop: Loop) -> None:
    seed(loop.engine, *PAYMENT_LESSONS)
    update = fixture("jira.issue_updated")
    update["changelog"]["items"] = [{"field": "assignee", "toString": "Dana"}]
    loop.jira_event(update)
    loop.process()
    assert loop.jira.requests == []


def test_github_issue_gets_a_markdown_comment_edited_on_label(loop: Loop) -> None:
    seed(loop.engine, ("Spelling errors in the README: run codespell in CI", "x/y#1", REPO))
    loop.github.add_issue(REPO, 1, "Spelling error in the README file")
    opened = fixture("issues.opened")
    loop.github_event("issues.opened", opened)
    loop.process()
    [comment] = loop.github.comments_on(REPO, 1)
    assert (
        "**[pb-1]**" in comment["body"]
        and f"<!-- playbook-bot:lessons {REPO}#1 -->" in comment["body"]
    )
    assert loop.github.calls("POST", "/app/installations/777/access_tokens")
    seed(loop.engine, ("README spelling: commit has one t", "x/y#2", REPO))
    labeled = fixture("issues.labeled")
    loop.github_event("issues.labeled", labeled)
    loop.process()
    assert len(loop.github.comments_on(REPO, 1)) == 1
    assert "[pb-2]" in loop.github.comments_on(REPO, 1)[0]["body"]
    # The installation token was minted once and reused for the second delivery.
    assert len(loop.github.calls("POST", "/app/installations/777/access_tokens")) == 1


# --- 3, 4, 5: pull requests ------------------------------------------------------------------


LESSONS_BODY = """Fixes CTMS-4337. Applied [pb-1].

## Lessons
- Stripe retries webhooks for days; dedupe on the event id before touching the order.
"""


def test_pr_opened_links_captures_and_cites(loop: Loop) -> None:
    seed(loop.engine, *PAYMENT_LESSONS)
    loop.github_event("pull_request.opened", pull_request("opened", body=LESSONS_BODY))
    loop.process()
    captured = bullet(loop.engine, "pb-5")
    assert captured.status == "proposed"
    assert captured.learned_from == "CTMS-4337"
    assert captured.scope == "CTMS"
    assert captured.source == "pr_body" and captured.source_url == PR_URL
    with transaction(loop.engine) as session:
        [cited] = session.scalars(select(UsageEvent).where(UsageEvent.kind == "cited")).all()
    assert (cited.bullet_id, cited.ticket_key, cited.pr_key, cited.success) == (
        "pb-1",
        "CTMS-4337",
        f"{REPO}#2",
        None,
    )


def test_pr_closed_unmerged_demotes_lessons_from_its_ticket(loop: Loop) -> None:
    seed(
        loop.engine, *PAYMENT_LESSONS, ("Earlier lesson from the same ticket", "CTMS-4337", "CTMS")
    )
    loop.github_event("pull_request.opened", pull_request("opened", body=LESSONS_BODY))
    loop.github_event(
        "pull_request.closed",
        pull_request("closed", body=LESSONS_BODY, at="2026-11-04T10:00:00Z"),
    )
    loop.process()
    for bullet_id in ("pb-5", "pb-6"):
        demoted = bullet(loop.engine, bullet_id)
        assert demoted.status == "deprecated"
        assert demoted.demoted_reason == "pr_closed_unmerged"
        assert demoted.demoted_on is not None
        with transaction(loop.engine) as session:
            last = lifecycle.history(session, bullet_id)[-1]
        assert f"{REPO}#2 closed without merge" in (last.reason or "")
    assert bullet(loop.engine, "pb-1").status == "active"
    assert bullet(loop.engine, "pb-1").cites_failure == 1


def test_another_open_pr_for_the_ticket_keeps_its_lessons(loop: Loop) -> None:
    seed(loop.engine, ("Lesson learned from CTMS-4337's first attempt", "CTMS-4337", "CTMS"))
    loop.github_event("pull_request.opened", pull_request("opened", number=3))
    loop.github_event("pull_request.closed", pull_request("closed", number=2))
    loop.process()
    assert bullet(loop.engine, "pb-1").status == "active"


def test_merge_activates_restores_and_settles_success(loop: Loop) -> None:
    seed(loop.engine, *PAYMENT_LESSONS, ("Lesson from the ticket", "CTMS-4337", "CTMS"))
    loop.github_event("pull_request.closed", pull_request("closed", number=2, body=LESSONS_BODY))
    loop.process()
    assert bullet(loop.engine, "pb-5").status == "deprecated"
    merged = pull_request(
        "closed", number=3, merged=True, body=LESSONS_BODY, at="2026-11-05T10:00:00Z"
    )
    loop.github_event("pull_request.closed", merged)
    loop.process()
    restored = bullet(loop.engine, "pb-5")
    assert (restored.status, restored.demoted_reason) == ("active", None)
    with transaction(loop.engine) as session:
        assert "merged" in (lifecycle.history(session, "pb-5")[-1].reason or "")
    # pb-6 came from the rejected PR #2's Lessons section: PR #3 merging does not vouch for
    # PR #2's work, so it stays deprecated. PR #3 proposed the same lesson in its own
    # section, so its own copy (pb-7) is what becomes active.
    first_pr_lesson = bullet(loop.engine, "pb-6")
    assert (first_pr_lesson.status, first_pr_lesson.demoted_reason) == (
        "deprecated",
        "pr_closed_unmerged",
    )
    second_pr_lesson = bullet(loop.engine, "pb-7")
    assert (second_pr_lesson.status, second_pr_lesson.source_url) == (
        "active",
        f"https://github.com/{REPO}/pull/3",
    )
    cited = bullet(loop.engine, "pb-1")
    assert (cited.cites, cited.cites_success, cited.cites_failure) == (2, 1, 1)


def test_pr_events_twice_or_out_of_order_leave_the_same_state(loop: Loop) -> None:
    seed(loop.engine, *PAYMENT_LESSONS)
    opened = pull_request("opened", body=LESSONS_BODY, at="2026-11-03T10:00:00Z")
    closed = pull_request("closed", body=LESSONS_BODY, at="2026-11-04T10:00:00Z")
    loop.github_event("pull_request.closed", closed)
    loop.github_event("pull_request.closed", copy.deepcopy(closed))
    loop.github_event("pull_request.opened", opened)
    loop.process()
    with transaction(loop.engine) as session:
        bullets = [lifecycle.get(session, f"pb-{n}") for n in range(1, 6)]
        assert [b.status for b in bullets] == ["active"] * 4 + ["deprecated"]
        assert (
            session.scalars(select(UsageEvent).where(UsageEvent.kind == "cited")).all()[0].success
            is False
        )
        assert len(session.scalars(select(UsageEvent).where(UsageEvent.kind == "cited")).all()) == 1
        assert usage.recount(session) == []


def test_needs_review_policy_only_demotes_flagged_tickets(
    engine: Engine, database_url: str
) -> None:
    from tests.loop_harness import start_loop

    loop = start_loop(engine, database_url, PLAYBOOK_DEMOTE_POLICY="needs-review")
    try:
        seed(
            loop.engine,
            ("Lesson from CTMS-4337", "CTMS-4337", "CTMS"),
            ("Lesson from CTMS-9", "CTMS-9", "CTMS"),
        )
        loop.jira.add_issue("CTMS-4337", "x", labels=["needs-human-review"])
        loop.jira.add_issue("CTMS-9", "y")
        loop.github_event("pull_request.closed", pull_request("closed", number=2))
        loop.github_event(
            "pull_request.closed", pull_request("closed", number=3, title="CTMS-9 fix")
        )
        loop.process()
        assert bullet(loop.engine, "pb-1").status == "deprecated"
        assert bullet(loop.engine, "pb-2").status == "active"
    finally:
        loop.github.stop()
        loop.jira.stop()


# --- 6: comments -----------------------------------------------------------------------------


def test_lesson_command_from_a_writer_is_captured_and_answered(loop: Loop) -> None:
    loop.github.add_issue(REPO, 1, "Spelling error")
    loop.github.permissions[(REPO, "maintainer")] = "write"
    loop.github_event(
        "issue_comment.created",
        issue_comment("/lesson Run codespell in CI before merging docs changes", "maintainer"),
    )
    loop.process()
    captured = bullet(loop.engine, "pb-1")
    assert (captured.learned_from, captured.scope, captured.source) == (
        f"{REPO}#1",
        REPO,
        "comment",
    )
    [reply] = loop.github.comments_on(REPO, 1)
    assert "Captured pb-1" in reply["body"]
    assert loop.github.calls("GET", f"/repos/{REPO}/collaborators/maintainer/permission")


def test_commands_from_others_change_nothing_and_get_a_polite_reply(loop: Loop) -> None:
    seed(loop.engine, ("A lesson", "x/y#1", REPO))
    loop.github.add_issue(REPO, 1, "Spelling error")
    loop.github.permissions[(REPO, "drive-by")] = "read"
    payload = issue_comment("/playbook deprecate pb-1 I do not like it", "drive-by")
    loop.github_event("issue_comment.created", payload, delivery="c-1")
    loop.github_event("issue_comment.created", payload, delivery="c-1")
    loop.process()
    assert bullet(loop.engine, "pb-1").status == "active"
    [reply] = loop.github.comments_on(REPO, 1)
    assert "Only people with write access" in reply["body"]


def test_playbook_commands_change_bullets(loop: Loop) -> None:
    seed(loop.engine, ("A lesson", "x/y#1", REPO), ("Another lesson entirely", "x/y#2", REPO))
    loop.github.add_issue(REPO, 1, "Spelling error")
    loop.github.permissions[(REPO, "lead")] = "admin"
    loop.github_event(
        "issue_comment.created",
        issue_comment(
            "/playbook deprecate pb-1 superseded by pb-2\n/playbook restore pb-9", "lead"
        ),
    )
    loop.process()
    demoted = bullet(loop.engine, "pb-1")
    assert (demoted.status, demoted.demoted_reason) == ("deprecated", "superseded by pb-2")
    body = loop.github.comments_on(REPO, 1)[0]["body"]
    assert "pb-1 is now deprecated" in body and "no bullet with id 'pb-9'" in body


def test_bullet_ids_in_pr_comments_are_cites(loop: Loop) -> None:
    seed(loop.engine, *PAYMENT_LESSONS)
    loop.github_event("pull_request.opened", pull_request("opened"))
    loop.github_event(
        "issue_comment.created", issue_comment("pb-2 helped here", "reviewer", on_pr=True)
    )
    loop.process()
    with transaction(loop.engine) as session:
        [cite] = session.scalars(select(UsageEvent).where(UsageEvent.kind == "cited")).all()
    assert (cite.bullet_id, cite.pr_key, cite.ticket_key) == ("pb-2", f"{REPO}#2", "CTMS-4337")


def jira_command(loop: Loop, body: str, author: dict[str, Any]) -> dict[str, Any]:
    """A comment as Jira stores it, and its comment_created delivery."""
    loop.jira.add_issue("CTMS-4337", "Checkout deadlocks")
    comment_id = loop.jira.add_comment("CTMS-4337", body, author)
    return jira_comment_created(comment_id, body, author)


DANA = {"accountId": "5b10a2844c20165700ede21g", "displayName": "Dana Reyes"}


def test_jira_lesson_command_from_an_allowed_user(loop: Loop) -> None:
    body = "/lesson Take a row lock with SELECT ... FOR UPDATE before re-reading the order."
    loop.jira_event(jira_command(loop, body, DANA))
    loop.process()
    captured = bullet(loop.engine, "pb-1")
    assert (captured.learned_from, captured.scope) == ("CTMS-4337", "CTMS")
    [_command, reply] = loop.jira.comments["CTMS-4337"]
    assert "Captured pb-1" in reply["body"]
    # The reply carries the bot's marker as a comment property, for finding it again.
    assert loop.jira.properties[reply["id"]]["playbook-bot"]["marker"] == (
        "playbook-bot:reply:" + _command["id"] + " CTMS-4337"
    )


# --- 7: installations, missing credentials -----------------------------------------------------


def test_removed_installation_stops_the_bot(loop: Loop) -> None:
    seed(loop.engine, ("Spelling errors in the README: run codespell", "x/y#1", REPO))
    loop.github.add_issue(REPO, 1, "Spelling error in the README file")
    deleted = fixture("installation.deleted")
    deleted["installation"]["id"] = INSTALLATION
    loop.github_event("installation.deleted", deleted)
    loop.process()
    loop.github_event("issues.opened", fixture("issues.opened"))
    loop.process()
    assert loop.github.comments_on(REPO, 1) == []


def test_missing_credentials_skip_side_effects_and_name_the_setting(
    engine: Engine, database_url: str
) -> None:
    from tests.loop_harness import start_loop

    loop = start_loop(
        engine, database_url, GITHUB_APP_ID=None, GITHUB_APP_PRIVATE_KEY=None, JIRA_URL=None
    )
    try:
        seed(loop.engine, *PAYMENT_LESSONS)
        loop.jira_event(fixture("jira.issue_created"))
        loop.process()
        with transaction(loop.engine) as session:
            [skipped] = session.scalars(select(SideEffect)).all()
            assert skipped.status == "skipped" and "JIRA_URL" in (skipped.detail or "")
            assert session.scalars(select(UsageEvent)).all() == []  # nothing was shown
        assert loop.jira.requests == []
    finally:
        loop.github.stop()
        loop.jira.stop()


def test_github_outage_retries_then_succeeds(loop: Loop) -> None:
    seed(loop.engine, ("Spelling errors in the README: run codespell", "x/y#1", REPO))
    loop.github.add_issue(REPO, 1, "Spelling error in the README file")
    loop.github.fail("POST", f"/repos/{REPO}/issues/1/comments", 502)
    loop.github_event("issues.opened", fixture("issues.opened"))
    loop.process()
    assert loop.github.comments_on(REPO, 1) == []
    from datetime import timedelta

    from playbook import clock

    with clock.frozen(clock.now() + timedelta(minutes=1)):
        loop.process()
    assert len(loop.github.comments_on(REPO, 1)) == 1


# --- the whole life of a bullet ---------------------------------------------------------------


def test_the_whole_life_of_a_bullet_is_told_by_its_revisions(loop: Loop) -> None:
    from datetime import UTC, datetime, timedelta

    from playbook import clock, upkeep

    start = datetime(2026, 11, 2, 9, 0, tzinfo=UTC)

    def day(n: int):
        return clock.frozen(start + timedelta(days=n))

    lesson = "Stripe retries webhooks for days; dedupe on the event id before touching the order."
    with day(0):  # captured from the Lessons section of the PR that fixes CTMS-4337
        body = f"Fixes CTMS-4337.\n\n## Lessons\n- {lesson}\n"
        opened = pull_request("opened", body=body, at="2026-11-02T09:00:00Z")
        loop.github_event("pull_request.opened", opened)
        loop.process()
    assert bullet(loop.engine, "pb-1").status == "proposed"
    with day(1):  # ... which is merged
        merged = pull_request("closed", body=body, merged=True, at="2026-11-03T09:00:00Z")
        loop.github_event("pull_request.closed", merged)
        loop.process()
    with day(2):  # shown on a new ticket about the same problem
        issue = copy.deepcopy(fixture("jira.issue_created"))
        issue["issue"]["key"] = "CTMS-4400"
        issue["issue"]["fields"]["summary"] = "Stripe webhook retries charge the order twice"
        loop.jira.add_issue("CTMS-4400", issue["issue"]["fields"]["summary"])
        loop.jira_event(issue)
        loop.process()
    [post] = loop.jira.calls("POST", "/rest/api/2/issue/CTMS-4400/comment")
    assert "\\[pb-1\\]" in post.json["body"]
    with day(3):  # cited by the PR for that ticket, which is merged
        cite = pull_request(
            "closed",
            number=3,
            title="CTMS-4400: dedupe retried webhooks",
            body="Applied [pb-1].",
            merged=True,
            at="2026-11-05T09:00:00Z",
            branch="feature/ctms-4400",
        )
        loop.github_event("pull_request.closed", cite)
        loop.process()
    used = bullet(loop.engine, "pb-1")
    assert (used.loads, used.cites, used.cites_success) == (1, 1, 1)
    with day(20), transaction(loop.engine) as session:  # used 17 days ago: kept
        assert upkeep.prune(session, apply=True, min_observation_days=0).archived == []
    with day(64), transaction(loop.engine) as session:  # unused for 61 days, but it helped
        report = upkeep.prune(session, apply=True)
        assert (report.archived, [c.bullet_id for c in report.kept]) == ([], ["pb-1"])
    with day(64), transaction(loop.engine) as session:  # only a person archives it
        lifecycle.archive(session, "pb-1", actor="bob", reason="Stripe checkout was removed")
    assert bullet(loop.engine, "pb-1").demoted_reason == "Stripe checkout was removed"
    with day(65), transaction(loop.engine) as session:  # someone still needs it
        lifecycle.restore(session, "pb-1", actor="alice", reason="still true for Stripe")
    with transaction(loop.engine) as session:
        story = [
            (r.action, r.actor, r.reason, r.at.date()) for r in lifecycle.history(session, "pb-1")
        ]
        events = [
            (e.kind, e.ticket_key, e.success)
            for e in session.scalars(select(UsageEvent).order_by(UsageEvent.id))
        ]
    assert [(action, when) for action, _, _, when in story] == [
        ("create", start.date()),
        ("approve", (start + timedelta(days=1)).date()),
        ("archive", (start + timedelta(days=64)).date()),
        ("restore", (start + timedelta(days=65)).date()),
    ]
    assert PR_URL in story[0][2]
    assert f"{REPO}#2 merged" in story[1][2]
    assert story[2][1:3] == ("bob", "Stripe checkout was removed")
    assert story[3][1:3] == ("alice", "still true for Stripe")
    assert events == [("loaded", "CTMS-4400", None), ("cited", "CTMS-4400", True)]
    assert bullet(loop.engine, "pb-1").status == "active"

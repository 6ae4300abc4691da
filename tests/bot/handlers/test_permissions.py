"""Only the people who may change the playbook change it, and each piece of evidence counts once.

Forged Jira deliveries, comments whose payload lies about their author, PRs closed by people
without write access, and stale evidence arriving again after a maintainer's decision.
"""

from __future__ import annotations

import copy
import json
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import Engine, select

from bot.backfill import backfill
from bot.config import Settings
from bot.worker import Services
from playbook.db import transaction
from playbook.lessons import lifecycle
from playbook.models import Delivery
from tests.loop_harness import REPO, Loop, start_loop
from tests.payloads import fixture_body, jira_comment_created, pull_request
from webhooks import create_app

DANA = {"accountId": "5b10a2844c20165700ede21g", "displayName": "Dana Reyes"}
MALLORY = {
    "accountId": "mallory-1",
    "displayName": "Dana Reyes",
    "emailAddress": "dana@example.com",
}


def seed(engine: Engine, *lessons: tuple[str, str, str], status: str = "active") -> None:
    with transaction(engine) as session:
        for text, learned_from, scope in lessons:
            lifecycle.add(
                session, text, learned_from=learned_from, scope=scope, actor="seed", status=status
            )


def bullet(engine: Engine, bullet_id: str):
    with transaction(engine) as session:
        return lifecycle.get(session, bullet_id)


def outcomes(engine: Engine) -> list[tuple[str, str | None]]:
    with transaction(engine) as session:
        return [
            (r.status, r.reason) for r in session.scalars(select(Delivery).order_by(Delivery.id))
        ]


# --- Jira ------------------------------------------------------------------------------------


def test_jira_refuses_deliveries_when_no_secret_is_set(engine: Engine, settings: Settings) -> None:
    unsigned = settings.model_copy(update={"jira_webhook_secret": None})
    client = create_app(unsigned, engine=engine).test_client()
    response = client.post(
        "/webhooks/jira", data=fixture_body("jira.issue_created"), content_type="application/json"
    )
    assert response.status_code == 401
    assert "JIRA_WEBHOOK_SECRET" in response.get_json()["message"]


def test_unsigned_jira_only_with_the_flag_and_a_loud_warning(
    engine: Engine, settings: Settings, caplog: pytest.LogCaptureFixture
) -> None:
    unsigned = settings.model_copy(
        update={"jira_webhook_secret": None, "jira_allow_unsigned": True}
    )
    client = create_app(unsigned, engine=engine).test_client()
    assert "PLAYBOOK_JIRA_ALLOW_UNSIGNED" in caplog.text and "WITHOUT" in caplog.text
    response = client.post(
        "/webhooks/jira", data=fixture_body("jira.issue_created"), content_type="application/json"
    )
    assert response.status_code == 202


def test_a_jira_comment_is_judged_by_the_author_jira_reports(loop: Loop) -> None:
    """The payload says Dana (allowed) wrote it; Jira says Mallory did: nothing changes."""
    seed(loop.engine, ("Keep the orders lock short", "CTMS-1", "CTMS"))
    loop.jira.add_issue("CTMS-4337", "Checkout deadlocks")
    body = "/playbook deprecate pb-1 it is wrong"
    comment_id = loop.jira.add_comment("CTMS-4337", body, MALLORY)
    loop.jira_event(jira_comment_created(comment_id, body, DANA))
    loop.process()
    assert bullet(loop.engine, "pb-1").status == "active"
    [_command, reply] = loop.jira.comments["CTMS-4337"]
    assert "Only people with a place in PLAYBOOK_JIRA_ALLOWED_USERS" in reply["body"]
    assert "Dana Reyes" in reply["body"]  # Mallory's display name, as Jira has it


def test_a_jira_comment_that_jira_does_not_have_is_ignored(loop: Loop) -> None:
    seed(loop.engine, ("Keep the orders lock short", "CTMS-1", "CTMS"))
    loop.jira.add_issue("CTMS-4337", "Checkout deadlocks")
    loop.jira_event(jira_comment_created("99999", "/playbook deprecate pb-1 forged", DANA))
    loop.process()
    assert bullet(loop.engine, "pb-1").status == "active"
    assert loop.jira.comments["CTMS-4337"] == []  # no reply to a comment that does not exist
    [(status, reason)] = outcomes(loop.engine)
    assert status == "ignored" and "no comment 99999" in (reason or "")


def test_the_text_jira_has_is_the_text_carried_out(loop: Loop) -> None:
    seed(loop.engine, ("Keep the orders lock short", "CTMS-1", "CTMS"))
    loop.jira.add_issue("CTMS-4337", "Checkout deadlocks")
    comment_id = loop.jira.add_comment("CTMS-4337", "/playbook approve pb-1", DANA)
    loop.jira_event(jira_comment_created(comment_id, "/playbook deprecate pb-1 swapped", DANA))
    loop.process()
    assert bullet(loop.engine, "pb-1").status == "active"


def test_an_email_in_the_allowed_list_allows_nobody(engine: Engine, database_url: str) -> None:
    loop = start_loop(engine, database_url, PLAYBOOK_JIRA_ALLOWED_USERS="dana@example.com")
    try:
        seed(loop.engine, ("Keep the orders lock short", "CTMS-1", "CTMS"))
        loop.jira.add_issue("CTMS-4337", "Checkout deadlocks")
        body = "/playbook deprecate pb-1 by email"
        comment_id = loop.jira.add_comment("CTMS-4337", body, MALLORY)
        loop.jira_event(jira_comment_created(comment_id, body, MALLORY))
        loop.process()
        assert bullet(loop.engine, "pb-1").status == "active"
    finally:
        loop.github.stop()
        loop.jira.stop()


def test_a_jira_project_permission_can_allow(engine: Engine, database_url: str) -> None:
    loop = start_loop(
        engine,
        database_url,
        PLAYBOOK_JIRA_ALLOWED_USERS="",
        PLAYBOOK_JIRA_PERMISSION="ADMINISTER_PROJECTS",
    )
    try:
        seed(loop.engine, ("Keep the orders lock short", "CTMS-1", "CTMS"))
        loop.jira.add_issue("CTMS-4337", "Checkout deadlocks")
        loop.jira.project_permissions[("CTMS", "lead-7")] = {"ADMINISTER_PROJECTS"}
        lead = {"accountId": "lead-7", "displayName": "Lee"}
        body = "/playbook deprecate pb-1 superseded"
        comment_id = loop.jira.add_comment("CTMS-4337", body, lead)
        loop.jira_event(jira_comment_created(comment_id, body, lead))
        loop.process()
        assert bullet(loop.engine, "pb-1").status == "deprecated"
        assert loop.jira.calls("GET", "/rest/api/2/user/permission/search")
    finally:
        loop.github.stop()
        loop.jira.stop()


# --- GitHub pull requests ----------------------------------------------------------------------

TICKET_LESSON = ("Dedupe webhook retries on the event id", "CTMS-4337", "CTMS")
CLOSED_AT = "2026-11-04T10:00:00Z"  # when the PRs below last changed, unless a test says


OUTSIDER = {"login": "drive-by", "type": "User"}


def test_a_pr_closed_by_someone_without_write_access_demotes_nothing(loop: Loop) -> None:
    seed(loop.engine, TICKET_LESSON)
    loop.github.permissions[(REPO, "drive-by")] = "read"
    body = "Fixes CTMS-4337, applied [pb-1]."
    loop.github_event(
        "pull_request.opened", pull_request("opened", body=body, author=OUTSIDER, at=CLOSED_AT)
    )
    loop.github_event(
        "pull_request.closed",
        pull_request("closed", body=body, author=OUTSIDER, sender=OUTSIDER, at=CLOSED_AT),
    )
    loop.process()
    lesson = bullet(loop.engine, "pb-1")
    assert lesson.status == "active"
    assert (lesson.cites, lesson.cites_failure) == (1, 0)  # the cite is there, unsettled
    status, reason = outcomes(loop.engine)[-1]
    assert status == "ignored"
    assert "drive-by has no write access" in (reason or "")


def test_a_fork_pr_closed_by_its_author_demotes_nothing(loop: Loop) -> None:
    seed(loop.engine, TICKET_LESSON)  # drive-by is not a collaborator at all
    loop.github_event(
        "pull_request.closed",
        pull_request("closed", author=OUTSIDER, sender=OUTSIDER, at=CLOSED_AT),
    )
    loop.process()
    assert bullet(loop.engine, "pb-1").status == "active"


def test_an_agent_bot_closing_its_own_pr_is_trusted(loop: Loop) -> None:
    seed(loop.engine, TICKET_LESSON)
    agent = {"login": "coding-agent[bot]", "type": "Bot"}
    loop.github_event(
        "pull_request.closed", pull_request("closed", author=agent, sender=agent, at=CLOSED_AT)
    )
    loop.process()
    assert bullet(loop.engine, "pb-1").status == "deprecated"


def test_a_listed_agent_account_closing_its_own_pr_is_trusted(
    engine: Engine, database_url: str
) -> None:
    loop = start_loop(engine, database_url, PLAYBOOK_AGENT_LOGINS="Agent-Account")
    try:
        seed(loop.engine, TICKET_LESSON)
        agent = {"login": "agent-account", "type": "User"}
        loop.github_event(
            "pull_request.closed", pull_request("closed", author=agent, sender=agent, at=CLOSED_AT)
        )
        loop.process()
        assert bullet(loop.engine, "pb-1").status == "deprecated"
    finally:
        loop.github.stop()
        loop.jira.stop()


def test_a_bot_closing_someone_elses_pr_needs_write_access(loop: Loop) -> None:
    seed(loop.engine, TICKET_LESSON)
    stale_bot = {"login": "stale[bot]", "type": "Bot"}
    loop.github_event(
        "pull_request.closed",
        pull_request("closed", author=OUTSIDER, sender=stale_bot, at=CLOSED_AT),
    )
    loop.process()
    assert bullet(loop.engine, "pb-1").status == "active"


def restore_by_hand(engine: Engine, bullet_id: str) -> None:
    with transaction(engine) as session:
        lifecycle.restore(session, bullet_id, actor="cli:maintainer", reason="it was right")


def test_a_restore_by_hand_survives_edits_duplicates_and_backfill(loop: Loop) -> None:
    seed(loop.engine, TICKET_LESSON)
    closed = pull_request("closed", at=CLOSED_AT)
    loop.github_event("pull_request.closed", closed)
    loop.process()
    assert bullet(loop.engine, "pb-1").status == "deprecated"
    restore_by_hand(loop.engine, "pb-1")
    # An edit of the closed PR (newer updated_at), a duplicate delivery of "closed" under a
    # new id, and the same payload again: none of them is new evidence.
    edited = pull_request("closed", at=CLOSED_AT)
    edited["action"] = "edited"
    edited["pull_request"]["updated_at"] = "2026-11-06T08:00:00Z"
    loop.github_event("pull_request.edited", edited)
    loop.github_event("pull_request.closed", copy.deepcopy(closed))
    loop.process()
    assert bullet(loop.engine, "pb-1").status == "active"
    # A backfill walks the same PR again, through the API.
    loop.github.add_pull(
        REPO,
        2,
        title="CTMS-4337: dedupe",
        body="Fixes CTMS-4337.",
        state="closed",
        closed_at=CLOSED_AT,
        updated_at=(datetime.now(UTC) - timedelta(days=1)).strftime("%Y-%m-%dT%H:%M:%SZ"),
        closed_by="Codertocat",
    )
    backfill(Services(engine=loop.engine, settings=loop.settings), REPO, timedelta(days=30))
    assert bullet(loop.engine, "pb-1").status == "active"


def test_stale_evidence_never_flips_a_decision_made_after_it(engine: Engine, database_url) -> None:
    """On a fresh database a backfill meets an old rejection after a maintainer's restore."""
    loop = start_loop(engine, database_url)
    try:
        seed(loop.engine, TICKET_LESSON)
        with transaction(loop.engine) as session:
            lifecycle.deprecate(session, "pb-1", reason="doubt", actor="cli:maintainer")
        restore_by_hand(loop.engine, "pb-1")
        loop.github_event("pull_request.closed", pull_request("closed", at="2026-01-04T10:00:00Z"))
        loop.process()
        assert bullet(loop.engine, "pb-1").status == "active"
    finally:
        loop.github.stop()
        loop.jira.stop()


def test_a_deprecation_by_hand_is_not_undone_by_an_older_merge(loop: Loop) -> None:
    seed(loop.engine, TICKET_LESSON, status="proposed")
    with transaction(loop.engine) as session:
        lifecycle.deprecate(session, "pb-1", reason="wrong", actor="lead (comment)")
    # The merge happened before the lead's decision but is delivered after it.
    merged = pull_request("closed", merged=True, at="2026-01-02T10:00:00Z")
    loop.github_event("pull_request.closed", merged)
    loop.process()
    assert bullet(loop.engine, "pb-1").status == "deprecated"


def test_a_rejected_prs_lessons_stay_rejected_when_another_pr_merges(loop: Loop) -> None:
    seed(loop.engine, TICKET_LESSON)
    lessons = "Fixes CTMS-4337.\n\n## Lessons\n- Send the email from the webhook handler itself.\n"
    loop.github_event(
        "pull_request.opened", pull_request("opened", number=2, body=lessons, at=CLOSED_AT)
    )
    loop.github_event(
        "pull_request.closed",
        pull_request("closed", number=2, body=lessons, at=CLOSED_AT),
    )
    loop.process()
    assert bullet(loop.engine, "pb-2").status == "deprecated"  # PR #2's own lesson
    loop.github_event(
        "pull_request.closed",
        pull_request("closed", number=3, merged=True, at="2026-11-05T10:00:00Z"),
    )
    loop.process()
    assert bullet(loop.engine, "pb-1").status == "active"  # the ticket's lesson: restored
    rejected = bullet(loop.engine, "pb-2")
    assert (rejected.status, rejected.demoted_reason) == ("deprecated", "pr_closed_unmerged")


def test_a_proposed_lesson_of_an_open_pr_waits_for_that_pr(loop: Loop) -> None:
    lessons = "Fixes CTMS-4337.\n\n## Lessons\n- Log the provider's event id with each change.\n"
    loop.github_event(
        "pull_request.opened", pull_request("opened", number=2, body=lessons, at=CLOSED_AT)
    )
    loop.github_event(
        "pull_request.closed",
        pull_request("closed", number=3, merged=True, at="2026-11-05T10:00:00Z"),
    )
    loop.process()
    assert bullet(loop.engine, "pb-1").status == "proposed"


def test_settings_parse_the_new_trust_options() -> None:
    settings = Settings(
        _env_file=None,
        PLAYBOOK_AGENT_LOGINS=" Bot-One , two ",
        PLAYBOOK_JIRA_ALLOWED_USERS="acc-1, JIRAUSER10100",
    )
    assert settings.agents == {"bot-one", "two"}
    assert settings.jira_allowed == {"acc-1", "JIRAUSER10100"}


def test_deliveries_list_shows_why_a_delivery_was_ignored(loop: Loop, cli) -> None:
    loop.github_event(
        "pull_request.closed",
        pull_request("closed", author=OUTSIDER, sender=OUTSIDER, at=CLOSED_AT),
    )
    loop.process()
    listed = cli("deliveries", "list").stdout.splitlines()
    assert listed[0].split()[:4] == ["ID", "SOURCE", "EVENT", "OUTCOME"]
    assert "ignored" in listed[1] and "drive-by" in listed[1]
    shown = json.loads(cli("deliveries", "show", listed[1].split()[0]).stdout)
    assert shown["status"] == "ignored" and "drive-by" in shown["reason"]

"""`/playbook helpful|unhelpful pb-N [reason]` on GitHub and in Jira: a verdict on fit, never on
the lesson.

Each command becomes one person's labelled (ticket, lesson) pair in the scope the ticket is
searched in; the reply says so in one line, with the reason inert. Said again, it replaces the
earlier verdict. The lesson (status, counters, cites, ratings, revisions) never moves.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Engine, func, select

from playbook import clock
from playbook.db import transaction
from playbook.fit.calibration import MIN_LABELS
from playbook.lessons import lifecycle
from playbook.lessons.capture import FIT_USAGE, Command, commands_in, without_feedback
from playbook.models import (
    BotComment,
    Bullet,
    FitCalibration,
    FitLabel,
    Rating,
    Revision,
    UsageEvent,
)
from playbook.repos.settings import FILE_PATH
from tests.e2e.test_repo_settings import open_issue
from tests.loop_harness import REPO, Loop
from tests.payloads import fixture, issue_comment, jira_comment_created, pull_request

OWNER = REPO.split("/")[0]
SHARED = f"{OWNER}/shared"  # the scope the repository's settings file names
JIRA_ISSUE = "CTMS-4337"  # the Jira fixture's issue: the payment webhook retries deadlock
DANA = {"accountId": "5b10a2844c20165700ede21g", "displayName": "Dana Reyes"}  # allowed
MALLORY = {"accountId": "mallory-1", "displayName": "Dana Reyes"}  # not allowed
README = "Spelling errors in the README file: run codespell on README files in CI"
WEBHOOK = "Payment webhook retries must be idempotent: dedupe on the event id"
# A reason that would ping, link, embed and inject if it were echoed raw.
HOSTILE_MARKDOWN = (
    "@octocat see [this](https://evil.example/x) ![p](https://evil.example/p.png) "
    "<img src=x onerror=alert(1)> www.evil.example"
)
HOSTILE_WIKI = (
    "[~accountid:5b10a2844c20165700ede21g] [click|https://evil.example] !p.png! {color:red}x"
)


def _add(engine: Engine, text: str, scope: str) -> str:
    with transaction(engine) as session:
        return lifecycle.add(session, text, learned_from="X-1", actor="seed", scope=scope).bullet.id


def _lesson(engine: Engine, bullet_id: str) -> tuple[Any, ...]:
    """Everything a lesson is and has: its row, revisions, usage events and ratings."""
    with transaction(engine) as session:
        row = session.get(Bullet, bullet_id)
        assert row is not None
        columns = tuple(getattr(row, c.key) for c in Bullet.__table__.columns)
        counts = tuple(
            session.scalar(
                select(func.count()).select_from(model).where(model.bullet_id == bullet_id)
            )
            for model in (Revision, UsageEvent, Rating)
        )
    return columns, counts


def _labels(engine: Engine) -> list[tuple[Any, ...]]:
    with transaction(engine) as session:
        rows = session.scalars(select(FitLabel).order_by(FitLabel.id)).all()
        return [
            (r.scope, r.ticket_key, r.bullet_id, r.helpful, r.source, r.target, r.actor, r.reason)
            for r in rows
        ]


def _shown_with(engine: Engine, target: str, key: str, estimate: float) -> list[str]:
    """The lessons the bot's comment on ``key`` shows, each given ``estimate`` as it was shown
    (the comment path records one per lesson); returns their ids."""
    with transaction(engine) as session:
        row = session.scalars(
            select(BotComment).where(
                BotComment.target == target,
                BotComment.ticket_key == key,
                BotComment.purpose == "lessons",
            )
        ).one()
        row.relevances = [estimate] * len(row.bullet_ids)
        return list(row.bullet_ids)


def _github(loop: Loop, body: str, user: str, *, on_pr: bool = False) -> str:
    """``body`` as a new comment by ``user`` on issue 1 (or PR 2); the bot's reply."""
    number = 2 if on_pr else 1
    before = len(loop.github.comments_on(REPO, number))
    payload = issue_comment(body, user, on_pr=on_pr)
    payload["comment"]["id"] = 9000 + before  # a new comment each time: each is answered once
    loop.github_event("issue_comment.created", payload)
    loop.process()
    replies = loop.github.comments_on(REPO, number)
    assert len(replies) == before + 1, body
    return replies[-1]["body"].split("\n<!--")[0]  # without the bot's hidden marker


def _jira(loop: Loop, body: str, author: dict[str, Any] = DANA) -> str:
    """``body`` as a new comment on CTMS-4337 by ``author`` (as Jira has it); the reply."""
    comment_id = loop.jira.add_comment(JIRA_ISSUE, body, author)
    loop.jira_event(jira_comment_created(comment_id, body, author))
    loop.process()
    reply = loop.jira.comments[JIRA_ISSUE][-1]["body"]
    assert reply != body, f"no reply to {body}"
    return reply


def test_the_verbs_are_read_one_lesson_each() -> None:
    assert commands_in(
        "/playbook helpful PB-3\n/playbook unhelpful pb-4 about refunds, not UI"
    ) == [
        Command("helpful", bullet_id="pb-3"),
        Command("unhelpful", bullet_id="pb-4", reason="about refunds, not UI"),
    ]
    for bad in (
        "/playbook helpful",
        "/playbook unhelpful",
        "/playbook helpful 3",
        "/playbook unhelpful pb-three off topic",
        "/playbook unhelpful pb-3 pb-4 both off topic",
    ):
        assert commands_in(bad) == [Command("playbook", problem=FIT_USAGE)], bad
    # A feedback line names a lesson without using it; other lines keep their ids.
    text = "Used [pb-1].\n/playbook unhelpful pb-2 see pb-3\n  /playbook HELPFUL pb-4\n"
    assert without_feedback(text) == "Used [pb-1].\n\n\n"
    assert without_feedback("/playbook deprecate pb-5") == "/playbook deprecate pb-5"
    # A line GitHub shows as a verdict once a comment before it is hidden is one too.
    assert without_feedback("<!-- x -->/playbook helpful pb-6\n<!-- pb-7 -->") == "\n"
    assert without_feedback("<!-- pb-7 --> pb-8") == "<!-- pb-7 --> pb-8"


def test_github_verdicts_are_kept_in_the_repositorys_scope_and_the_lesson_never_moves(
    loop: Loop,
) -> None:
    lesson = _add(loop.engine, README, SHARED)
    unshown = _add(loop.engine, "Keep retries short under load always", REPO)
    foreign = _add(loop.engine, "A lesson of another owner entirely", "victim/secret")
    loop.github.put_file(REPO, FILE_PATH, f"scope: {SHARED}\n".encode())
    loop.github.permissions[(REPO, "maintainer")] = "write"
    loop.github.permissions[(REPO, "drive-by")] = "read"
    open_issue(loop, "Spelling error in the README file")
    assert _shown_with(loop.engine, "github", f"{REPO}#1", 0.8) == [lesson]
    before = _lesson(loop.engine, lesson)

    refused = _github(loop, f"/playbook unhelpful {lesson} noise", "drive-by")
    assert "Only people with write access" in refused and _labels(loop.engine) == []

    reply = _github(loop, f"/playbook helpful {lesson}", "maintainer")
    assert reply == (
        f"Noted: {lesson} fitted this ticket. It counts toward the fit estimate for {SHARED}; "
        "the lesson itself is unchanged."
    )
    reply = _github(loop, f"/playbook unhelpful {lesson} {HOSTILE_MARKDOWN}", "maintainer")
    assert reply.startswith(f"Noted, replacing your earlier verdict: {lesson} did not fit this")
    assert reply.endswith(f"fit estimate for {SHARED}; the lesson itself is unchanged.")
    # Shown as the text it is: no ping, link, image, tag or comment.
    assert "@octocat" not in reply and "@\u200boctocat" in reply
    assert "<" not in reply and "](https://" not in reply and "www.evil" not in reply
    # One verdict (the latest), its reason stored as written, in the settings file's scope.
    assert _labels(loop.engine) == [
        (SHARED, f"{REPO}#1", lesson, False, "command", "github", "maintainer", HOSTILE_MARKDOWN)
    ]
    with transaction(loop.engine) as session:
        assert session.scalars(select(FitLabel.relevance)).one() == 0.8

    # In reach but not in the bot's comment: kept, and said to teach the estimate nothing.
    reply = _github(loop, f"/playbook unhelpful {unshown}", "maintainer")
    assert "did not show it with an estimate" in reply and "unchanged" in reply
    # Another owner's lesson is answered as an id that does not exist; bad and missing ids
    # are answered with the usage.
    missing = _github(loop, "/playbook unhelpful pb-9999 off topic", "maintainer")
    assert missing.startswith("Nothing changed: no bullet with id 'pb-9999'")
    unknown = _github(loop, f"/playbook unhelpful {foreign} off topic", "maintainer")
    assert unknown.replace(f"'{foreign}'", "'pb-9999'") == missing
    for bad in ("/playbook helpful", "/playbook helpful pb-x", f"/playbook helpful {lesson} pb-2"):
        assert _github(loop, bad, "maintainer") == f"Could not read that command: {FIT_USAGE}."
    assert len(_labels(loop.engine)) == 2
    assert _lesson(loop.engine, lesson) == before


def test_a_verdict_on_a_pull_request_is_no_cite(loop: Loop) -> None:
    lesson = _add(loop.engine, WEBHOOK, REPO)
    loop.github.permissions[(REPO, "maintainer")] = "write"
    loop.github.add_pull(REPO, 2, title="Dedupe webhook retries")
    loop.github_event("pull_request.opened", pull_request("opened"))
    loop.process()
    before = _lesson(loop.engine, lesson)
    reply = _github(
        loop, f"/playbook unhelpful {lesson} see {lesson} elsewhere", "maintainer", on_pr=True
    )
    assert reply.startswith(f"Noted: {lesson} did not fit this ticket")
    assert _lesson(loop.engine, lesson) == before  # no cite, so no rating when the PR closes
    # The harness sees cites: the same id written as a cite is one.
    payload = issue_comment(f"Applied [{lesson}] here.", "maintainer", on_pr=True)
    payload["comment"]["id"] = 9999
    loop.github_event("issue_comment.created", payload)
    loop.process()
    assert _lesson(loop.engine, lesson) != before


def test_jira_verdicts_from_the_author_jira_reports_refit_the_projects_estimate(
    loop: Loop,
) -> None:
    lesson = _add(loop.engine, WEBHOOK, "CTMS")
    repo_lesson = _add(loop.engine, "Keep retries short under load always", REPO)
    loop.jira.add_issue(JIRA_ISSUE, "Checkout times out when the payment webhook retries")
    loop.jira_event(fixture("jira.issue_created"))
    loop.process()
    assert lesson in _shown_with(loop.engine, "jira", JIRA_ISSUE, 0.9)
    # Enough of the project's verdicts that the next one refits its calibration.
    with transaction(loop.engine) as session:
        for n in range(MIN_LABELS - 1):
            session.add(
                FitLabel(
                    scope="CTMS",
                    ticket_key=f"CTMS-{n + 1}",
                    bullet_id=lesson,
                    helpful=False,
                    source="command",
                    target="jira",
                    actor="seed",
                    relevance=0.9,
                    at=clock.now(),
                )
            )
    before = _lesson(loop.engine, lesson)

    # The payload says Dana wrote it; Jira says Mallory did: refused, nothing kept.
    comment_id = loop.jira.add_comment(JIRA_ISSUE, f"/playbook unhelpful {lesson}", MALLORY)
    loop.jira_event(jira_comment_created(comment_id, f"/playbook unhelpful {lesson}", DANA))
    loop.process()
    assert (
        "Only people with a place in PLAYBOOK_JIRA_ALLOWED_USERS"
        in (loop.jira.comments[JIRA_ISSUE][-1]["body"])
    )
    with transaction(loop.engine) as session:
        assert session.get(FitCalibration, "CTMS") is None

    assert _jira(loop, f"/playbook unhelpful {lesson}").startswith(f"Noted: {lesson} did not")
    reply = _jira(loop, f"/playbook unhelpful {lesson} {HOSTILE_WIKI}")
    assert reply.startswith(f"Noted, replacing your earlier verdict: {lesson} did not fit")
    assert reply.endswith(
        "It counts toward the fit estimate for CTMS; the lesson itself is unchanged."
    )
    # Wiki markup shown as text: no mention, link, image or colour.
    for escaped in ("\\[\\~accountid:", "\\[click\\|https", "\\!p.png\\!", "\\{color:red\\}x"):
        assert escaped in reply, escaped
    mine = [label for label in _labels(loop.engine) if label[6] != "seed"]
    assert mine == [
        ("CTMS", JIRA_ISSUE, lesson, False, "command", "jira", DANA["accountId"], HOSTILE_WIKI)
    ]
    with transaction(loop.engine) as session:
        calibration = session.get(FitCalibration, "CTMS")
        assert calibration is not None and calibration.labels == MIN_LABELS
        assert calibration.shift < 0  # every verdict said "did not fit"

    assert (
        _jira(loop, "/playbook unhelpful off topic") == f"Could not read that command: {FIT_USAGE}."
    )
    # A repository's lesson is out of a Jira project's reach: answered as a missing id.
    missing = _jira(loop, "/playbook helpful pb-9999")
    assert missing.startswith("Nothing changed: no bullet with id 'pb-9999'")
    assert (
        _jira(loop, f"/playbook helpful {repo_lesson}").replace(repo_lesson, "pb-9999") == missing
    )
    assert _lesson(loop.engine, lesson) == before

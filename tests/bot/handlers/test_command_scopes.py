"""Every `/playbook` comment command, on GitHub and in Jira, reaches only its place's lessons.

An attacker with write access to their own repository (or a permitted Jira user of their own
project) names another owner's lessons and a Jira project's: nothing changes, and the reply
is word for word the reply to an id that does not exist, so it tells neither that the lesson
exists nor its status. The same commands on the place's own lessons (and global ones) work,
so the walk proves the wall, not a broken harness.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Engine, func, select

from playbook.db import transaction
from playbook.lessons import lifecycle
from playbook.lessons.capture import PLAYBOOK_VERBS
from playbook.models import Bullet, FitLabel, Revision
from tests.loop_harness import REPO, Loop
from tests.payloads import issue_comment, jira_comment_created, pull_request

VICTIM = "victim/secret"
JIRA_ISSUE = "CTMS-4337"  # the Jira fixture's issue, in project CTMS
DANA = {"accountId": "5b10a2844c20165700ede21g", "displayName": "Dana Reyes"}  # allowed
MISSING = "pb-9999"
# Texts sharing no word, so no seeded lesson is taken for a near-duplicate of another.
WORDS = (
    " ".join(f"{word}{n}" for word in ("keep", "retries", "short", "under", "load", "always"))
    for n in range(1000)
)


def _lessons(engine: Engine, scope: str) -> dict[str, str]:
    """A proposed, an active, a deprecated and a second active lesson of ``scope``, by role."""
    made: dict[str, str] = {}
    with transaction(engine) as session:
        for role, status in (("proposed", "proposed"), ("active", "active"), ("other", "active")):
            made[role] = lifecycle.add(
                session, next(WORDS), learned_from="X-1", actor="seed", scope=scope, status=status
            ).bullet.id
        made["deprecated"] = lifecycle.add(
            session, next(WORDS), learned_from="X-1", actor="seed", scope=scope
        ).bullet.id
        lifecycle.deprecate(session, made["deprecated"], reason="seeded so", actor="seed")
    return made


def _commands(target: dict[str, str], own: dict[str, str]) -> list[str]:
    """Every `/playbook` verb (fit verdicts too) naming ``target``'s lessons, as the lesson and
    as the replacement."""
    return [
        f"/playbook approve {target['proposed']}",
        f"/playbook deprecate {target['active']} it leaked the payroll DB password",
        f"/playbook restore {target['deprecated']}",
        f"/playbook supersede {target['active']} by {own['active']} mine is better",
        f"/playbook supersede {own['other']} by {target['active']}",
        f"/playbook helpful {target['active']}",
        f"/playbook unhelpful {target['deprecated']} off topic for @victim",
    ]


def test_the_walk_names_every_verb() -> None:
    """A verb added to the parser is walked below, or this fails."""
    walked = {command.split()[1] for command in _commands(_missing(), _missing())}
    assert walked == set(PLAYBOOK_VERBS)


def _missing() -> dict[str, str]:
    return dict.fromkeys(("proposed", "active", "deprecated", "other"), MISSING)


def _state(engine: Engine) -> tuple[list[tuple[Any, ...]], int, int]:
    """Every lesson's status, replacement and reason, and how many revisions and fit verdicts
    there are."""
    with transaction(engine) as session:
        rows = session.execute(
            select(Bullet.id, Bullet.status, Bullet.superseded_by, Bullet.demoted_reason)
        ).all()
        count = session.scalar(select(func.count()).select_from(Revision))
        verdicts = session.scalar(select(func.count()).select_from(FitLabel))
    return sorted(tuple(row) for row in rows), int(count or 0), int(verdicts or 0)


def _github(loop: Loop, body: str) -> str:
    """``body`` as a new comment on issue 1 of REPO by a writer there; the bot's reply."""
    before = len(loop.github.comments_on(REPO, 1))
    payload = issue_comment(body, "attacker")
    payload["comment"]["id"] = 8000 + before  # a new comment each time: each is answered once
    loop.github_event("issue_comment.created", payload)
    loop.process()
    replies = loop.github.comments_on(REPO, 1)
    assert len(replies) == before + 1, body
    return replies[-1]["body"].split("\n<!--")[0]  # without the bot's hidden marker


def _jira(loop: Loop, body: str) -> str:
    """``body`` as a new comment on CTMS-4337 by a permitted Jira user; the bot's reply."""
    comment_id = loop.jira.add_comment(JIRA_ISSUE, body, DANA)
    loop.jira_event(jira_comment_created(comment_id, body, DANA))
    loop.process()
    reply = loop.jira.comments[JIRA_ISSUE][-1]["body"]
    assert reply != body, f"no reply to {body}"
    return reply.split("\n<!--")[0]


def _walk(loop: Loop, post: Any, own: dict[str, str], foreign: list[dict[str, str]]) -> None:
    """Each command on each foreign scope changes nothing and is answered as a missing id."""
    expected = [post(command) for command in _commands(_missing(), own)]
    # What a missing id is answered: nothing changed, no such lesson here.
    assert all(reply.startswith("Nothing changed: no bullet with id") for reply in expected)
    for target in foreign:
        before = _state(loop.engine)
        for command, for_missing in zip(_commands(target, own), expected, strict=True):
            reply = post(command)
            assert _state(loop.engine) == before, f"{command} changed the playbook"
            same = reply
            for bullet_id in target.values():
                same = same.replace(f"'{bullet_id}'", f"'{MISSING}'")
            assert same == for_missing, command  # no existence, no status told
            assert "deprecated" not in reply and "superseded by" not in reply


def test_github_commands_never_reach_another_owners_or_a_jira_projects_lessons(
    loop: Loop,
) -> None:
    own = _lessons(loop.engine, REPO)
    shared = _lessons(loop.engine, "global")
    victim = _lessons(loop.engine, VICTIM)
    jira = _lessons(loop.engine, "CTMS")
    loop.github.add_issue(REPO, 1, "Anything")
    loop.github.permissions[(REPO, "attacker")] = "write"

    _walk(loop, lambda body: _github(loop, body), own, [victim, jira])

    # The same commands work on the repository's own lessons and on global ones.
    assert _github(loop, f"/playbook approve {own['proposed']}").endswith("is now active.")
    assert _github(loop, f"/playbook restore {shared['deprecated']}").endswith("is now active.")
    reply = _github(loop, f"/playbook supersede {own['active']} by {shared['active']}")
    assert reply == f"{own['active']} is now superseded by {shared['active']}."
    assert _github(loop, f"/playbook helpful {shared['active']}").startswith("Noted:")
    assert _github(loop, f"/playbook unhelpful {own['other']} no").startswith("Noted:")


def test_jira_commands_never_reach_a_repositorys_or_another_projects_lessons(
    loop: Loop,
) -> None:
    own = _lessons(loop.engine, "CTMS")
    repo = _lessons(loop.engine, REPO)
    victim = _lessons(loop.engine, VICTIM)
    other_project = _lessons(loop.engine, "PAY")
    loop.jira.add_issue(JIRA_ISSUE, "Checkout deadlocks")

    _walk(loop, lambda body: _jira(loop, body), own, [repo, victim, other_project])

    assert _jira(loop, f"/playbook approve {own['proposed']}").endswith("is now active.")
    reply = _jira(loop, f"/playbook deprecate {own['active']} wrong")
    assert reply.endswith("is now deprecated.")
    assert _jira(loop, f"/playbook unhelpful {own['other']} no").startswith("Noted:")


def test_a_global_lesson_is_never_superseded_by_a_scoped_one_from_a_comment(loop: Loop) -> None:
    """Global readers (every owner) would be sent to a lesson only one scope can read."""
    own = _lessons(loop.engine, REPO)
    shared = _lessons(loop.engine, "global")
    loop.github.add_issue(REPO, 1, "Anything")
    loop.github.permissions[(REPO, "attacker")] = "write"
    before = _state(loop.engine)
    reply = _github(loop, f"/playbook supersede {shared['active']} by {own['active']}")
    assert reply.startswith("Nothing changed:") and "global one" in reply
    assert _state(loop.engine) == before


def test_a_lesson_written_on_a_pr_naming_a_jira_key_stays_in_the_repository(loop: Loop) -> None:
    """Any repository's PR can name CTMS-4337; its comments neither write into the Jira
    project nor learn which of its lessons a text duplicates."""
    text = "Take a row lock before re-reading the order in a retried webhook handler"
    with transaction(loop.engine) as session:
        theirs = lifecycle.add(session, text, learned_from="CTMS-1", actor="t", scope="CTMS")
    loop.github.permissions[(REPO, "attacker")] = "write"
    loop.github.add_pull(REPO, 2, title="CTMS-4337: dedupe webhook retries")
    loop.github_event("pull_request.opened", pull_request("opened"))  # titled CTMS-4337: ...
    loop.process()
    payload = issue_comment(f"/lesson {text}", "attacker", on_pr=True)
    loop.github_event("issue_comment.created", payload)
    loop.process()
    reply = loop.github.comments_on(REPO, 2)[-1]["body"]
    assert theirs.bullet.id not in reply and "Captured" in reply
    with transaction(loop.engine) as session:
        [added] = session.scalars(select(Bullet).where(Bullet.id != theirs.bullet.id)).all()
        assert (added.scope, added.learned_from) == (REPO, "CTMS-4337")

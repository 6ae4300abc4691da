"""Lessons captured from a pull request are anchored to what it changed: the whole bot against
the fake GitHub (a Lessons section, a `/lesson`, a reviewer's line comment)."""

from __future__ import annotations

import json
import logging
from typing import Any

from sqlalchemy import Engine, select

from playbook.db import transaction
from playbook.lessons import lifecycle
from playbook.models import Bullet, SideEffect
from tests.e2e.test_review_proposals import close, on_github, proposals, seed
from tests.loop_harness import Loop
from tests.payloads import REPO, issue_comment, pull_request

LESSON = "Webhook retries: dedupe on the delivery id before touching the order"
BODY = f"Fixes #1.\n\n## Lessons\n- {LESSON}\n"
SLASH = "Take the orders row lock once per transaction, never twice"
MAINTAINER = "Codertocat"  # write access in the loop harness


def changes(loop: Loop, *paths: str, number: int = 2, status: str = "modified") -> None:
    for path in paths:
        loop.github.add_pull_file(REPO, number, path, "+x", status)


def lesson(engine: Engine, text: str) -> dict[str, Any]:
    with transaction(engine) as session:
        bullet = session.scalars(select(Bullet).where(Bullet.text == text)).one()
        return lifecycle.as_dict(bullet)


def created_with(engine: Engine, bullet_id: str) -> Any:
    """The anchors the lesson's "create" revision recorded."""
    with transaction(engine) as session:
        created, *_ = lifecycle.history(session, bullet_id)
        return (created.after or {}).get("paths")


def merge(loop: Loop, body: str = BODY, delivery: str | None = None) -> None:
    loop.github.add_pull(REPO, 2, title="CTMS-4337: dedupe webhook retries")
    loop.github_event("pull_request.opened", pull_request("opened", body=body), delivery)
    closed = pull_request("closed", body=body, merged=True, at="2026-11-05T10:00:00Z")
    loop.github_event("pull_request.closed", closed)
    loop.process()


def file_reads(loop: Loop, number: int = 2) -> int:
    path = f"/repos/{REPO}/pulls/{number}/files"
    return sum(1 for r in loop.github.requests if r.method == "GET" and r.path == path)


def test_a_merged_prs_lesson_is_anchored_to_its_two_files_everywhere_it_shows(
    loop: Loop, cli, client
) -> None:
    changes(loop, "orders/locking.py", "webhooks/retries.py", "poetry.lock")
    merge(loop)
    captured = lesson(loop.engine, LESSON)
    assert captured["paths"] == ["orders/locking.py", "webhooks/retries.py"]
    # Read once for the capture, however many deliveries the PR had (and none for staleness:
    # nothing was anchored before).
    assert file_reads(loop) == 1
    assert created_with(loop.engine, captured["id"]) == captured["paths"]
    shown = cli("show", captured["id"]).stdout
    assert "paths:        orders/locking.py, webhooks/retries.py" in shown
    assert json.loads(cli("show", captured["id"], "--json").stdout)["paths"] == captured["paths"]
    answer = client.get(
        f"/api/v1/lessons/{captured['id']}", headers={"Authorization": "Bearer agent-token"}
    )
    assert answer.status_code == 200, answer.text
    assert answer.get_json()["paths"] == ["orders/locking.py", "webhooks/retries.py"]


def test_a_pr_of_forty_files_under_orders_anchors_to_the_folder(loop: Loop) -> None:
    changes(loop, *(f"orders/{sub}/part_{n}.py" for sub in ("api", "db") for n in range(20)))
    merge(loop)
    assert lesson(loop.engine, LESSON)["paths"] == ["orders/**"]


def test_a_pr_touching_everything_anchors_nothing(loop: Loop) -> None:
    changes(loop, *(f"{top}/x.py" for top in ("api", "db", "mail", "orders", "web")))
    merge(loop)
    assert lesson(loop.engine, LESSON)["paths"] is None


def test_a_redelivery_captures_nothing_twice_and_reads_no_file_again(loop: Loop) -> None:
    changes(loop, "orders/locking.py")
    merge(loop, delivery="first-opened")
    first = lesson(loop.engine, LESSON)
    reads = file_reads(loop)
    # GitHub redelivers, and the author edits the PR's files afterwards: nothing moves.
    changes(loop, "web/app.py")
    loop.github_event("pull_request.opened", pull_request("opened", body=BODY), "first-opened")
    loop.github_event("pull_request.edited", pull_request("edited", body=BODY))
    loop.process()
    assert lesson(loop.engine, LESSON)["paths"] == first["paths"] == ["orders/locking.py"]
    assert file_reads(loop) == reads
    with transaction(loop.engine) as session:
        revisions = lifecycle.history(session, first["id"])
        same = session.scalars(select(Bullet.id).where(Bullet.text == LESSON)).all()
    assert same == [first["id"]]
    assert all((r.after or {}).get("paths") == ["orders/locking.py"] for r in revisions)


def test_a_failed_read_of_the_files_keeps_the_lesson_without_anchors(
    loop: Loop, caplog: Any
) -> None:
    changes(loop, "orders/locking.py")
    loop.github.fail("GET", f"/repos/{REPO}/pulls/2/files", 502, times=50)
    with caplog.at_level(logging.WARNING, logger="bot.lesson_anchors"):
        merge(loop)
    captured = lesson(loop.engine, LESSON)
    assert captured["paths"] is None
    assert "lessons captured without anchors" in caplog.text
    with transaction(loop.engine) as session:
        failed = session.scalars(
            select(SideEffect.status).where(SideEffect.action == "read_files_for_anchors")
        ).all()
    assert "failed" in failed


def test_a_lesson_command_on_a_pr_is_anchored_to_its_files(loop: Loop) -> None:
    loop.github.add_repo(REPO)
    loop.github.add_pull(REPO, 2, title="CTMS-4337: dedupe webhook retries")
    changes(loop, "orders/locking.py")
    loop.github_event(
        "issue_comment.created", issue_comment(f"/lesson {SLASH}", MAINTAINER, on_pr=True)
    )
    loop.process()
    captured = lesson(loop.engine, SLASH)
    assert captured["paths"] == ["orders/locking.py"]
    assert created_with(loop.engine, captured["id"]) == ["orders/locking.py"]


def test_a_lesson_command_on_an_issue_has_no_anchors(loop: Loop) -> None:
    loop.github.add_repo(REPO)
    loop.github_event("issue_comment.created", issue_comment(f"/lesson {SLASH}", MAINTAINER))
    loop.process()
    assert lesson(loop.engine, SLASH)["paths"] is None
    assert not any("/files" in r.path for r in loop.github.requests)


def test_a_lesson_command_by_someone_without_write_access_reads_no_files(loop: Loop) -> None:
    loop.github.add_repo(REPO)
    loop.github.add_pull(REPO, 2, title="CTMS-4337: dedupe webhook retries")
    loop.github.permissions[(REPO, "drive-by")] = "read"
    changes(loop, "orders/locking.py")
    loop.github_event(
        "issue_comment.created", issue_comment(f"/lesson {SLASH}", "drive-by", on_pr=True)
    )
    loop.process()
    assert file_reads(loop) == 0


def test_a_reviewers_line_comment_anchors_its_proposal_to_that_file(loop: Loop) -> None:
    seed(loop.engine)
    on_github(loop)
    loop.github.add_review_comment(
        REPO, 2, "Always release the row lock in a finally block.", "alice", path="orders/lock.py"
    )
    loop.github.add_review(REPO, 2, "Never retry inside a transaction.", "alice")
    close(loop)
    by_text = {p["text"]: p for p in proposals(loop.engine)}
    assert by_text["Always release the row lock in a finally block."]["paths"] == ["orders/lock.py"]
    # A review's summary names no file: its rule is about the repository's practice.
    assert by_text["Never retry inside a transaction."]["paths"] is None


def test_anchors_written_in_the_command_win_over_the_prs_files(loop: Loop) -> None:
    loop.github.add_repo(REPO)
    loop.github.add_pull(REPO, 2, title="CTMS-4337: dedupe webhook retries")
    changes(loop, "orders/locking.py")
    body = f"/lesson --paths web/**,mail/send.py {SLASH}"
    loop.github_event("issue_comment.created", issue_comment(body, MAINTAINER, on_pr=True))
    loop.process()
    assert lesson(loop.engine, SLASH)["paths"] == ["web/**", "mail/send.py"]
    assert file_reads(loop) == 0  # nothing to read: the writer said what it is about


def test_a_bad_paths_option_is_answered_and_adds_nothing(loop: Loop) -> None:
    loop.github.add_issue(REPO, 1, "Checkout deadlocks")
    body = f"/lesson --paths ../etc/passwd {SLASH}"
    loop.github_event("issue_comment.created", issue_comment(body, MAINTAINER))
    loop.process()
    [reply] = [c["body"] for c in loop.github.comments_on(REPO, 1)]
    assert "Could not read that command: --paths '../etc/passwd' has a '..' segment" in reply
    with transaction(loop.engine) as session:
        assert session.scalars(select(Bullet.id).where(Bullet.text == SLASH)).all() == []


def test_one_read_of_the_files_serves_every_handler_of_a_delivery(loop: Loop) -> None:
    # A lesson of the scope is anchored already: the PR's comment and staleness read the files.
    with transaction(loop.engine) as session:
        added = lifecycle.add(
            session,
            "Keep the order state machine in one module",
            learned_from="X-1",
            actor="seed",
            scope=REPO,
            paths=["orders/**"],
        )
        anchored = added.bullet.id
    loop.github.add_repo(REPO)
    changes(loop, "orders/locking.py", "orders/state.py")
    loop.github.add_pull(REPO, 2, title="CTMS-4337: dedupe webhook retries")
    loop.github_event("pull_request.opened", pull_request("opened", body=BODY))
    loop.process()
    assert file_reads(loop) == 1  # the lesson's anchors and the PR's comment
    assert lesson(loop.engine, LESSON)["paths"] == ["orders/locking.py", "orders/state.py"]
    assert any(anchored in c["body"] for c in loop.github.comments_on(REPO, 2))
    closed = pull_request("closed", body=BODY, merged=True, at="2026-11-05T10:00:00Z")
    loop.github_event("pull_request.closed", closed)
    loop.process()
    assert file_reads(loop) == 2  # the merge's own delivery reads them once more, for staleness

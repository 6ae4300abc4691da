"""Lessons where the agent edits: one PR comment listing the lessons anchored to its files."""

from __future__ import annotations

import re
from typing import Any

from sqlalchemy import Engine, select

from bot import repo_settings
from playbook.db import transaction
from playbook.lessons import lifecycle
from playbook.models import Bullet, UsageEvent
from playbook.repos.syncs import BRANCH
from tests.loop_harness import Loop
from tests.payloads import REPO, pull_request

SETTINGS_FILE = ".github/playbook-bot.yml"
BOT = {"login": "playbook-bot[bot]", "type": "Bot"}
HEAD = "### Lessons for the files this pull request changes"


def lesson(engine: Engine, text: str, paths: list[str] | None, scope: str = REPO) -> str:
    """An active lesson of ``scope`` anchored to ``paths``; returns its id."""
    with transaction(engine) as session:
        added = lifecycle.add(session, text, learned_from="CTMS-1", actor="seed", scope=scope)
        added.bullet.paths = paths
        return added.bullet.id


def changes(loop: Loop, *files: str | tuple[str, str], number: int = 2) -> None:
    """The PR's changed files from now on (a pair is a rename: new path, old path)."""
    loop.github.pull_files[(REPO, number)] = []
    for changed in files:
        new, old = changed if isinstance(changed, tuple) else (changed, None)
        status = "renamed" if old else "modified"
        loop.github.add_pull_file(REPO, number, new, "+x", status, previous_filename=old)


def deliver(loop: Loop, action: str, **fields: Any) -> None:
    loop.github_event(f"pull_request.{action}", pull_request(action, **fields))
    loop.process()


def anchors_comments(loop: Loop, number: int = 2) -> list[str]:
    return [c["body"] for c in loop.github.comments_on(REPO, number) if HEAD in c["body"]]


def setup(loop: Loop, settings: str | None = None) -> None:
    loop.github.add_repo(REPO)
    loop.github.add_pull(REPO, 2, title="CTMS-4337: dedupe webhook retries")
    if settings is not None:
        loop.github.put_file(REPO, SETTINGS_FILE, settings.encode())


def loads(engine: Engine) -> list[tuple[str, str | None]]:
    with transaction(engine) as session:
        rows = session.execute(
            select(UsageEvent.bullet_id, UsageEvent.ticket_key)
            .where(UsageEvent.kind == "loaded")
            .order_by(UsageEvent.id)
        )
        return [(row.bullet_id, row.ticket_key) for row in rows]


def test_posted_on_open_edited_on_push_and_says_so_when_none_applies(loop: Loop) -> None:
    setup(loop)
    locking = lesson(loop.engine, "Take the orders row lock once per transaction", ["orders/"])
    emails = lesson(loop.engine, "Retry confirmation emails with backoff", ["mail/**/*.py"])
    lesson(loop.engine, "Unanchored: dedupe webhook retries on the event id", None)
    lesson(loop.engine, "Another repository's lesson", ["orders/**"], scope="octo/other")
    changes(loop, "orders/locking.py", "README.md")
    deliver(loop, "opened")
    [body] = anchors_comments(loop)
    assert f"**[{locking}]** Take the orders row lock" in body
    assert "anchored to orders/locking.py" in body
    assert emails not in body and "Unanchored" not in body and "Another repository" not in body

    changes(loop, "orders/locking.py", "mail/send/retry.py")
    deliver(loop, "synchronize")
    [body] = anchors_comments(loop)  # edited in place, never a second
    assert locking in body and f"**[{emails}]**" in body
    assert "anchored to mail/send/retry.py" in body

    changes(loop, "docs/index.md")
    deliver(loop, "synchronize")
    [body] = anchors_comments(loop)
    assert locking not in body and emails not in body
    assert "No lesson in the playbook applies to the files this pull request changes" in body
    assert len(loop.github.comments_on(REPO, 2)) == 1


def test_a_pr_no_lesson_is_anchored_to_gets_no_comment(loop: Loop) -> None:
    setup(loop)
    lesson(loop.engine, "Take the orders row lock once per transaction", ["orders/"])
    lesson(loop.engine, "Anchored to everything, so to nothing", ["**"])
    changes(loop, "docs/index.md")
    deliver(loop, "opened")
    deliver(loop, "ready_for_review")
    assert loop.github.comments_on(REPO, 2) == []


def test_a_renamed_file_counts_by_its_old_path(loop: Loop) -> None:
    setup(loop)
    locking = lesson(
        loop.engine, "Take the orders row lock once per transaction", ["orders/lock.py"]
    )
    changes(loop, ("orders/locking.py", "orders/lock.py"))
    deliver(loop, "opened")
    [body] = anchors_comments(loop)
    assert locking in body and "anchored to orders/locking.py" in body


def test_not_on_the_bots_own_sync_pr(loop: Loop) -> None:
    setup(loop)
    lesson(loop.engine, "Keep AGENTS.md short", ["AGENTS.md"])
    changes(loop, "AGENTS.md")
    deliver(loop, "opened", branch=BRANCH, author=BOT)
    assert loop.github.comments_on(REPO, 2) == []


def test_pr_comment_false_keeps_the_bot_quiet_on_pull_requests(loop: Loop) -> None:
    setup(loop, "pr_comment: false\n")
    lesson(loop.engine, "Take the orders row lock once per transaction", ["orders/"])
    changes(loop, "orders/locking.py")
    deliver(loop, "opened")
    assert loop.github.comments_on(REPO, 2) == []
    assert loads(loop.engine) == []


def test_at_most_max_lessons_ranked_by_fit_to_the_prs_text(loop: Loop) -> None:
    setup(loop, "max_lessons: 2\n")
    unrelated = lesson(loop.engine, "Keep the CDN purge list sorted", ["web/**"])
    fitting = lesson(loop.engine, "Dedupe webhook retries on the provider's event id", ["web/**"])
    other = lesson(loop.engine, "Format prices in cents as integers", ["web/**"])
    changes(loop, "web/hooks.py")
    deliver(loop, "opened", title="CTMS-4337: dedupe webhook retries")
    [body] = anchors_comments(loop)
    # The default floor hides no anchored lesson: the anchor is the evidence. The lesson whose
    # words fit the PR's title comes first; two of the three are shown.
    listed = re.findall(r"^- \*\*\[(pb-\d+)\]\*\*", body, re.MULTILINE)
    assert listed[0] == fitting and len(listed) == 2 and set(listed) < {unrelated, fitting, other}
    assert "fit: matched" in body.split(fitting)[1].split("\n-")[0]


def test_a_floor_above_the_anchors_estimate_speaks_only_when_words_fit_too(loop: Loop) -> None:
    # An anchor alone estimates 0.5; a lesson whose words fit the PR's title as well is above.
    setup(loop, "min_relevance: 0.6\n")
    unrelated = lesson(loop.engine, "Keep the CDN purge list sorted", ["web/**"])
    changes(loop, "web/hooks.py")
    title = "CTMS-4337: dedupe webhook retries on the provider event id"
    deliver(loop, "opened", title=title)
    assert anchors_comments(loop) == []
    fitting = lesson(loop.engine, "Dedupe webhook retries on the provider's event id", ["web/**"])
    deliver(loop, "synchronize", title=title)
    [body] = anchors_comments(loop)
    listed = re.findall(r"^- \*\*\[(pb-\d+)\]\*\*", body, re.MULTILINE)
    assert listed == [fitting, unrelated]  # once one fits, the near one is worth a line too


def test_a_floor_no_lesson_reaches_posts_nothing_and_retracts_a_comment(loop: Loop) -> None:
    setup(loop)
    lesson(loop.engine, "Keep the CDN purge list sorted", ["web/**"])
    changes(loop, "web/hooks.py")
    deliver(loop, "opened", title="Tidy the hooks")
    [before] = anchors_comments(loop)
    loop.github.put_file(REPO, SETTINGS_FILE, b"min_relevance: 0.99\n")
    repo_settings.mark_stale(loop.engine, REPO)  # as a push of the settings file does
    deliver(loop, "synchronize", title="Tidy the hooks")
    [after] = anchors_comments(loop)  # edited in place, never a second comment
    assert "**[pb-1]**" in before and "**[pb-" not in after
    assert "No lesson in the playbook applies to the files this pull request changes" in after


def test_loads_recorded_once_against_the_prs_ticket(loop: Loop) -> None:
    setup(loop)
    locking = lesson(loop.engine, "Take the orders row lock once per transaction", ["orders/"])
    changes(loop, "orders/locking.py")
    deliver(loop, "opened")
    deliver(loop, "synchronize")
    changes(loop, "orders/locking.py", "orders/models.py")
    deliver(loop, "synchronize")
    assert loads(loop.engine) == [(locking, "CTMS-4337")]
    with transaction(loop.engine) as session:
        assert session.get(Bullet, locking).loads == 1


def test_a_pr_linking_no_ticket_loads_against_itself(loop: Loop) -> None:
    setup(loop)
    locking = lesson(loop.engine, "Take the orders row lock once per transaction", ["orders/"])
    changes(loop, "orders/locking.py")
    deliver(loop, "opened", title="Tidy the locking code")
    assert loads(loop.engine) == [(locking, f"{REPO}#2")]


def test_a_large_pr_is_read_a_hundred_files_to_a_page(loop: Loop) -> None:
    setup(loop)
    locking = lesson(loop.engine, "Take the orders row lock once per transaction", ["orders/"])
    changes(loop, *[f"generated/{i}.py" for i in range(250)], "orders/locking.py")
    deliver(loop, "opened")
    [body] = anchors_comments(loop)
    assert locking in body
    pages = [r for r in loop.github.requests if r.path.endswith("/pulls/2/files")]
    assert len(pages) == 3


def test_without_anchored_lessons_the_files_are_not_even_read(loop: Loop) -> None:
    setup(loop)
    lesson(loop.engine, "Unanchored: dedupe webhook retries on the event id", None)
    lesson(loop.engine, "Another repository's lesson", ["orders/**"], scope="octo/other")
    changes(loop, "orders/locking.py")
    deliver(loop, "opened")
    assert not [r for r in loop.github.requests if r.path.endswith("/pulls/2/files")]
    assert loop.github.comments_on(REPO, 2) == []

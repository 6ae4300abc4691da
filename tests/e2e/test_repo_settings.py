"""Per-repository settings through the whole bot: `.github/playbook-bot.yml` on the fake GitHub."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from sqlalchemy import Engine

from bot import repo_settings
from playbook import clock
from playbook.db import transaction
from playbook.lessons import lifecycle
from playbook.models import Delivery
from playbook.repos import stored
from playbook.repos.settings import FILE_PATH
from tests.loop_harness import Loop
from tests.payloads import REPO, fixture, push

OWNER = REPO.split("/")[0]
ORG_DEFAULTS = f"{OWNER}/.github"


def seed(engine: Engine, text: str, scope: str = REPO) -> str:
    with transaction(engine) as session:
        return lifecycle.add(session, text, learned_from="x/y#1", scope=scope, actor="t").bullet.id


def open_issue(loop: Loop, title: str, labels: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    """Deliver issues.opened for issue 1 with ``title``; the comments it ends with."""
    payload = fixture("issues.opened")
    payload["issue"]["title"] = title
    payload["issue"]["labels"] = [{"name": name, "id": i} for i, name in enumerate(labels, 1)]
    loop.github.add_issue(REPO, 1, title)
    loop.github_event("issues.opened", payload)
    loop.process()
    return loop.github.comments_on(REPO, 1)


def last_outcome(loop: Loop) -> str:
    with transaction(loop.engine) as session:
        row = session.query(Delivery).order_by(Delivery.id.desc()).first()
        assert row is not None
        return f"{row.status}: {row.reason or row.last_error or ''}"


def test_without_a_file_the_installation_settings_apply(loop: Loop) -> None:
    seed(loop.engine, "Spelling errors in the README: run codespell in CI")
    [comment] = open_issue(loop, "Spelling error in the README file")
    assert "[pb-1]" in comment["body"]


def test_comment_false_posts_nothing(loop: Loop) -> None:
    seed(loop.engine, "Spelling errors in the README: run codespell in CI")
    loop.github.put_file(REPO, FILE_PATH, b"comment: false\n")
    assert open_issue(loop, "Spelling error in the README file") == []


def test_organisation_defaults_apply_and_the_repository_file_wins(loop: Loop) -> None:
    seed(loop.engine, "Spelling errors in the README: run codespell in CI")
    loop.github.add_repo(ORG_DEFAULTS)
    loop.github.put_file(ORG_DEFAULTS, FILE_PATH, b"enabled: false\nmax_lessons: 3\n")
    assert open_issue(loop, "Spelling error in the README file") == []
    assert "turned the bot off" in last_outcome(loop)
    # The repository's own file is merged over the organisation's: its `enabled` wins, the
    # organisation's max_lessons stays.
    loop.github.put_file(REPO, FILE_PATH, b"enabled: true\n")
    loop.github_event("push", push(REPO, FILE_PATH))
    loop.process()
    found = repo_settings.cached(loop.engine, REPO)
    assert found is not None
    assert found.settings.enabled and found.settings.max_lessons == 3
    assert found.sources["enabled"] == "repository"
    assert found.sources["max_lessons"] == "organisation"
    [comment] = open_issue(loop, "Spelling error in the README file")
    assert "[pb-1]" in comment["body"]


def test_a_bad_file_keeps_the_last_good_settings_and_names_the_line(loop: Loop) -> None:
    seed(loop.engine, "Spelling errors in the README: run codespell in CI")
    loop.github.put_file(REPO, FILE_PATH, b"comment: false\n")
    assert open_issue(loop, "Spelling error in the README file") == []
    loop.github.put_file(REPO, FILE_PATH, b"comment: true\ncomment_style: loud\nmax_lessons: 99\n")
    loop.github_event("push", push(REPO, FILE_PATH))
    loop.process()
    assert not last_outcome(loop).startswith(("dead", "failed"))  # the delivery did not break
    found = repo_settings.cached(loop.engine, REPO)
    assert found is not None
    # The whole bad file is not applied: `comment: true` on line 1 waits for a good file.
    assert found.settings.comment is False
    problems = {(p.key, p.line) for p in found.problems}
    assert problems == {("comment_style", 2), ("max_lessons", 3)}
    assert all(p.file == FILE_PATH for p in found.problems)
    assert "the settings are enabled, scope" in next(
        p.message for p in found.problems if p.key == "comment_style"
    )
    labeled = fixture("issues.labeled")
    loop.github_event("issues.labeled", labeled)
    loop.process()
    assert loop.github.comments_on(REPO, 1) == []


def test_a_push_applies_a_change_at_once_and_otherwise_within_ten_minutes(loop: Loop) -> None:
    seed(loop.engine, "Spelling errors in the README: run codespell in CI")
    assert len(open_issue(loop, "Spelling error in the README file")) == 1
    reads = len(loop.github.calls("GET", f"/repos/{REPO}/contents/"))
    # Changed on GitHub, but no push seen: the cached settings stand (no read per delivery).
    loop.github.put_file(REPO, FILE_PATH, b"enabled: false\n")
    loop.github_event("issues.edited", fixture("issues.edited"))
    loop.process()
    assert len(loop.github.calls("GET", f"/repos/{REPO}/contents/")) == reads
    assert repo_settings.cached(loop.engine, REPO).settings.enabled is True
    # Ten minutes later, the next delivery reads it again.
    later = clock.now() + timedelta(minutes=10, seconds=1)
    with clock.frozen(later):
        loop.github_event("issues.edited", fixture("issues.edited"))
        loop.process()
    assert repo_settings.cached(loop.engine, REPO).settings.enabled is False
    assert "turned the bot off" in last_outcome(loop)


def test_a_push_to_another_branch_or_of_other_files_reads_nothing(loop: Loop) -> None:
    open_issue(loop, "anything")
    reads = len(loop.github.calls("GET", f"/repos/{REPO}/contents/"))
    loop.github_event("push", push(REPO, FILE_PATH, ref="refs/heads/feature"))
    loop.github_event("push", push(REPO, "README.md"))
    loop.process()
    assert len(loop.github.calls("GET", f"/repos/{REPO}/contents/")) == reads


def test_max_lessons_ignore_labels_and_a_shared_scope(loop: Loop) -> None:
    for n in range(4):
        seed(loop.engine, f"README spelling rule {n}: run codespell on README files")
    shared = seed(loop.engine, "README spelling: the shared org rule", scope=f"{OWNER}/shared")
    loop.github.put_file(
        REPO,
        FILE_PATH,
        f"max_lessons: 2\nignore_labels: [wontfix]\nscope: {OWNER}/shared\n".encode(),
    )
    [comment] = open_issue(loop, "README spelling errors")
    # The scope is the organisation's shared one: its lesson, not the repository's own.
    assert f"[{shared}]" in comment["body"] and "[pb-1]" not in comment["body"]


def test_ignored_label_gets_no_comment(loop: Loop) -> None:
    seed(loop.engine, "Spelling errors in the README: run codespell in CI")
    loop.github.put_file(REPO, FILE_PATH, b"ignore_labels: [WontFix]\n")
    assert open_issue(loop, "Spelling error in the README file", labels=("wontfix",)) == []
    assert "ignore_labels" in last_outcome(loop)


def test_a_scope_outside_the_owner_is_refused(loop: Loop) -> None:
    seed(loop.engine, "Spelling errors in the README: run codespell in CI")
    seed(loop.engine, "README spelling secret of another org", scope="victim/private")
    loop.github.put_file(REPO, FILE_PATH, b"scope: victim/private\n")
    [comment] = open_issue(loop, "Spelling error in the README file")
    assert "another org" not in comment["body"]
    found = repo_settings.cached(loop.engine, REPO)
    assert found is not None and found.scope == REPO
    assert [p.key for p in found.problems] == ["scope"]


def test_github_unreachable_keeps_the_last_good_settings(loop: Loop) -> None:
    seed(loop.engine, "Spelling errors in the README: run codespell in CI")
    loop.github.put_file(REPO, FILE_PATH, b"comment: false\n")
    assert open_issue(loop, "Spelling error in the README file") == []
    loop.github.fail("GET", f"/repos/{REPO}/contents/{FILE_PATH}", 502, times=5)
    loop.github_event("push", push(REPO, FILE_PATH))
    loop.github_event("issues.edited", fixture("issues.edited"))
    loop.process()
    found = repo_settings.cached(loop.engine, REPO)
    assert found is not None and found.settings.comment is False
    assert found.error and "502" in found.error
    assert loop.github.comments_on(REPO, 1) == []


def test_the_demote_policy_and_scope_of_a_repository_apply_to_its_pull_requests(
    loop: Loop,
) -> None:
    from tests.payloads import issue_comment, pull_request

    with transaction(loop.engine) as session:
        lifecycle.add(session, "Lesson from the first try", learned_from="CTMS-4337", actor="t")
    loop.github.put_file(
        REPO, FILE_PATH, f"demote_policy: needs-review\nscope: {OWNER}/shared\n".encode()
    )
    loop.github_event("pull_request.opened", pull_request("opened"))
    loop.github_event("pull_request.closed", pull_request("closed", at="2026-11-04T10:00:00Z"))
    loop.process()
    # needs-review: a close unmerged demotes only what a person flagged; nothing was.
    with transaction(loop.engine) as session:
        assert lifecycle.get(session, "pb-1").status == "active"
    loop.github.permissions[(REPO, "maintainer")] = "write"
    loop.github.add_issue(REPO, 1, "An issue")
    loop.github_event(
        "issue_comment.created", issue_comment("/lesson Pin the tool versions in CI", "maintainer")
    )
    loop.process()
    with transaction(loop.engine) as session:
        added = lifecycle.get(session, "pb-2")
    assert added.scope == f"{OWNER}/shared" and added.text == "Pin the tool versions in CI"


def test_holdout_percent_zero_keeps_a_repository_out_of_a_running_experiment(loop: Loop) -> None:
    from playbook.experiment import assignment, holdout

    seed(loop.engine, "Spelling errors in the README: run codespell in CI")
    with transaction(loop.engine) as session:
        assignment.start(session, 50, clock.now(), "cli:test")
    loop.github.put_file(REPO, FILE_PATH, b"holdout_percent: 0\n")
    payload = fixture("issues.opened")
    for number in range(1, 9):
        payload["issue"]["number"] = number
        payload["issue"]["title"] = "Spelling error in the README file"
        loop.github.add_issue(REPO, number, "Spelling error in the README file")
        loop.github_event("issues.opened", payload)
    loop.process()
    # Half of eight tickets would be held out by chance alone; none is, and none is enrolled.
    assert all(len(loop.github.comments_on(REPO, n)) == 1 for n in range(1, 9))
    with transaction(loop.engine) as session:
        assert all(holdout.exposures(session, f"{REPO}#{n}") == [] for n in range(1, 9))
        assert stored.holdout_percent(session, f"{REPO}#1") == 0


def test_a_failing_github_is_asked_again_after_a_minute_not_by_every_delivery(loop: Loop) -> None:
    seed(loop.engine, "Spelling errors in the README: run codespell in CI")
    path = f"/repos/{REPO}/contents/{FILE_PATH}"
    loop.github.fail("GET", path, 403, times=100)
    [comment] = open_issue(loop, "Spelling error in the README file")
    assert "[pb-1]" in comment["body"]  # no settings, no harm: the defaults apply
    asked = len(loop.github.calls("GET", path))
    for _ in range(3):
        loop.github_event("issues.edited", fixture("issues.edited"))
    loop.process()
    assert len(loop.github.calls("GET", path)) == asked
    found = repo_settings.cached(loop.engine, REPO)
    assert found is not None and "Contents (read) permission" in (found.error or "")
    with clock.frozen(clock.now() + timedelta(minutes=1, seconds=1)):
        loop.github_event("issues.edited", fixture("issues.edited"))
        loop.process()
    assert len(loop.github.calls("GET", path)) == asked + 1


def test_a_push_to_the_organisation_defaults_reaches_every_repository_of_the_owner(
    loop: Loop,
) -> None:
    seed(loop.engine, "Spelling errors in the README: run codespell in CI")
    loop.github.add_repo(ORG_DEFAULTS)
    loop.github.put_file(ORG_DEFAULTS, FILE_PATH, b"comment: true\n")
    assert len(open_issue(loop, "Spelling error in the README file")) == 1
    loop.github.put_file(ORG_DEFAULTS, FILE_PATH, b"enabled: false\n")
    loop.github_event("push", push(ORG_DEFAULTS, FILE_PATH))
    loop.process()
    loop.github_event("issues.edited", fixture("issues.edited"))
    loop.process()
    assert "turned the bot off" in last_outcome(loop)
    found = repo_settings.cached(loop.engine, REPO)
    assert found is not None and found.sources["enabled"] == "organisation"


def test_min_relevance_in_the_file_sets_the_floor_for_its_tickets(loop: Loop) -> None:
    seed(loop.engine, "Spelling errors in the README: run codespell in CI")
    seed(loop.engine, "Deploy workers only after the migrations ran")
    # One shared word: below the installation's floor, so no comment...
    assert open_issue(loop, "Dark mode for the README preview page") == []
    # ...until the repository asks for every match (0), and then back, strict (1).
    loop.github.put_file(REPO, FILE_PATH, b"min_relevance: 0\n")
    loop.github_event("push", push(REPO, FILE_PATH))
    loop.process()  # the settings are read again before the edit comes
    edited = fixture("issues.edited")
    edited["issue"]["title"] = "Dark mode for the README preview page"
    loop.github_event("issues.edited", edited)
    loop.process()
    [comment] = loop.github.comments_on(REPO, 1)
    assert "[pb-1]" in comment["body"] and "matched README" in comment["body"]
    loop.github.put_file(REPO, FILE_PATH, b"min_relevance: 1\n")
    loop.github_event("push", push(REPO, FILE_PATH))
    loop.process()
    loop.github_event("issues.edited", edited)
    loop.process()
    [comment] = loop.github.comments_on(REPO, 1)
    assert "No lesson in the playbook fits this ticket any more." in comment["body"]


def test_a_min_relevance_that_is_not_a_probability_is_refused_by_name(loop: Loop) -> None:
    seed(loop.engine, "Spelling errors in the README: run codespell in CI")
    loop.github.put_file(REPO, FILE_PATH, b"min_relevance: 2\n")
    open_issue(loop, "Spelling error in the README file")
    found = repo_settings.cached(loop.engine, REPO)
    assert found is not None and [p.key for p in found.problems] == ["min_relevance"]
    loop.github.put_file(REPO, FILE_PATH, b"min_relevance: true\n")
    loop.github_event("push", push(REPO, FILE_PATH))
    loop.process()
    found = repo_settings.cached(loop.engine, REPO)
    assert found is not None and [p.key for p in found.problems] == ["min_relevance"]

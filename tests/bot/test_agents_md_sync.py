"""The AGENTS.md sync against fake GitHub through the real PyGithub client: one PR, updated in
place, untouched when nothing changed, paused after a person closes it, resumable when killed
between any two calls, and never a byte changed outside the markers."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from github.GithubException import GithubException

from bot import agents_md, repo_settings
from playbook import clock
from playbook.db import transaction
from playbook.models import Bullet, RuleFileSync
from playbook.repos import syncs
from playbook.repos.syncs import BRANCH
from playbook.rules import END, START, block
from tests.bot.agents_md_world import World, world_for
from tests.payloads import REPO

BOT = "playbook-bot[bot]"


@pytest.fixture
def world(loop) -> World:
    """REPO with agents_md on and two lessons: one of the repository, one global."""
    found = world_for(loop)
    found.lesson("Dedupe webhook retries by the delivery id")
    found.lesson("Never hold a database lock across an HTTP call", scope="global")
    return found


def test_the_first_sync_opens_one_pr_creating_the_file_with_a_title_and_the_block(world) -> None:
    report = world.sync()
    assert report.action == "created"
    (pull,) = world.sync_pulls()
    assert report.pull_number == pull["number"] and report.pull_url == pull["html_url"]
    assert (pull["base"]["ref"], pull["user"]["login"], pull["user"]["type"]) == (
        "main",
        BOT,
        "Bot",
    )
    assert pull["title"] == "playbook-bot: 2 lessons for agents in AGENTS.md (+2, -0)"
    for bullet_id in ("pb-1", "pb-2"):
        assert f"| {bullet_id} | " in pull["body"]
    assert "new, not used yet" in pull["body"]
    assert "pause the sync for 30 days" in pull["body"]
    assert "`agents_md: {enabled: false}`" in pull["body"]
    created = world.on_branch()
    assert created is not None
    assert created.startswith(b"# Instructions for coding agents\n\n" + START.encode())
    assert created.endswith(END.encode() + b"\n")
    assert b"- [pb-1] Dedupe webhook retries by the delivery id" in created
    assert world.github.file_at(REPO, "AGENTS.md") is None  # main waits for the merge
    assert len(world.branch_commits()) == 1
    assert report.message == (
        f"{REPO}: opened PR #{pull['number']} with 2 lessons in AGENTS.md (+2, -0): "
        f"{pull['html_url']}"
    )
    row = world.state()
    assert row is not None and row.pull_number == pull["number"]
    assert row.lesson_ids == ["pb-1", "pb-2"] and row.block_sha


def test_a_second_run_with_nothing_changed_commits_nothing_and_opens_nothing(world) -> None:
    world.sync()
    before = (world.github.commits_on(REPO, BRANCH), len(world.writes()))
    report = world.sync()
    assert report.action == "unchanged"
    assert report.message.startswith(f"{REPO}: PR #{report.pull_number} already holds")
    assert (world.github.commits_on(REPO, BRANCH), len(world.writes())) == before
    assert len(world.sync_pulls()) == 1


def test_lessons_added_and_deprecated_update_the_same_pr_with_one_new_commit(world) -> None:
    first = world.sync()
    new = world.lesson("Pin the tool versions the CI installs")
    world.deprecate("pb-1", "merged PRs citing it were reverted")
    report = world.sync()
    assert report.action == "updated" and report.pull_number == first.pull_number
    (pull,) = world.sync_pulls()
    assert pull["title"] == "playbook-bot: 2 lessons for agents in AGENTS.md (+2, -0)"
    assert f"| {new} | Pin the tool versions the CI installs | new, not used yet |" in pull["body"]
    assert world.github.issues[(REPO, pull["number"])]["title"] == pull["title"]
    # One commit on top of main, replaced rather than stacked.
    assert len(world.branch_commits()) == 1
    assert world.github.commits_on(REPO, BRANCH)[1] == world.github.branch_sha(REPO, "main")
    text = world.on_branch() or b""
    assert b"[pb-1]" not in text and f"[{new}]".encode() in text
    # A reviewer who read the first version sees what this update changed, and why.
    since = pull["body"].split("### Since the previous version of this pull request")[1]
    assert f"- added {new}: new, not used yet" in since
    assert "- removed pb-1: deprecated: merged PRs citing it were reverted" in since
    # Against a file on main that holds pb-1, the description says why it went.
    world.github.merge_pull(REPO, pull["number"])
    world.deprecate("pb-2", "wrong since the driver retries itself")
    merged_next = world.sync()
    assert merged_next.action == "created" and merged_next.pull_number != pull["number"]
    body = world.sync_pulls()[-1]["body"]
    assert "| pb-2 | deprecated: wrong since the driver retries itself |" in body
    assert merged_next.removed == [
        {"id": "pb-2", "reason": "deprecated: wrong since the driver retries itself"}
    ]


def test_a_lesson_outranked_within_the_budget_is_removed_as_lower_ranked(loop) -> None:
    world = world_for(loop, "  max_chars: 500\n")
    kept = world.lesson("A " + "long lesson text " * 10)
    world.github.put_file(REPO, "AGENTS.md", b"# Team\n")
    world.sync()
    pull = world.sync_pulls()[0]
    world.github.merge_pull(REPO, pull["number"])
    rival = world.lesson("B " + "another long lesson text " * 8)
    with transaction(loop.engine) as session:
        # Cited in five merged PRs: it outranks the lesson in the file, and both cannot fit.
        rival_row = session.get(Bullet, rival)
        assert rival_row is not None
        rival_row.cites_success = 5
    report = world.sync()
    assert [a["id"] for a in report.added] == [rival]
    assert report.removed == [
        {"id": kept, "reason": "fell below the budget: lower-ranked than the lessons shown"}
    ]


@pytest.mark.parametrize(
    "before, after",
    [
        ("# Team rules\r\n\r\nBe kind. ✓ é\r\n", "\r\nMore team text, no final newline"),
        ("\ufeff## Ünïcödé\n\n", ""),
        ("Intro without a final line break", None),
    ],
)
def test_text_outside_the_markers_stays_byte_for_byte_the_same(world, before, after) -> None:
    if after is None:
        original = before.encode()
    else:
        newline = "\r\n" if "\r\n" in before else "\n"
        old_block = newline.join([START, "- [pb-99] an old lesson", END])
        original = (before + old_block + after).encode()
    world.github.put_file(REPO, "AGENTS.md", original)
    assert world.sync().action == "created"
    synced = world.on_branch() or b""
    if after is None:
        assert synced.startswith(original)
        assert synced[len(original) :].startswith(b"\n\n" + START.encode())
        return
    assert synced.startswith(before.encode()) and synced.endswith(after.encode())
    middle = synced[len(before.encode()) : len(synced) - len(after.encode())]
    assert middle.startswith(START.encode()) and middle.endswith(END.encode())
    if "\r\n" in before:
        assert middle.count(b"\n") == middle.count(b"\r\n")
    assert b"pb-99" not in middle
    assert world.sync().removed == [{"id": "pb-99", "reason": "no longer in the playbook"}]


@pytest.mark.parametrize("path", block.PATHS)
def test_each_path_is_created_with_its_title_and_front_matter(loop, path: str) -> None:
    world = world_for(loop, f"  path: {path}\n")
    world.lesson("Dedupe webhook retries by the delivery id")
    report = world.sync()
    assert (report.action, report.path) == ("created", path)
    created = world.on_branch(path) or b""
    assert START.encode() in created
    if path.endswith(".mdc"):
        assert created.startswith(b"---\ndescription: ")
        assert b"\nalwaysApply: true\n---\n" in created
    else:
        assert created.startswith(b"# ")
    assert f"in {path} (+1, -0)" in world.sync_pulls()[0]["title"]
    assert world.sync().action == "unchanged"


def test_a_merged_block_on_main_needs_no_pr(world) -> None:
    pull = world.sync_pulls() or [world.github.pulls[(REPO, world.sync().pull_number)]]
    world.github.merge_pull(REPO, pull[0]["number"])
    with transaction(world.loop.engine) as session:
        syncs.merged(session, REPO, "AGENTS.md", pull[0]["number"], pull[0]["html_url"])
    writes = len(world.writes())
    report = world.sync()
    assert report.action == "unchanged"
    assert (
        report.message
        == f"{REPO}: AGENTS.md on main already holds the 2 lessons; nothing committed"
    )
    assert len(world.writes()) == writes and len(world.sync_pulls()) == 1


def test_an_open_pr_made_redundant_by_main_is_closed_without_pausing(world) -> None:
    number = world.sync().pull_number
    assert number is not None
    world.github.put_file(REPO, "AGENTS.md", world.on_branch() or b"")  # copied by hand
    report = world.sync()
    assert report.action == "unchanged"
    assert report.message.endswith(f"; closed PR #{number}, which had nothing left to add")
    assert world.sync_pulls()[0]["state"] == "closed"
    assert world.sync().action == "unchanged"  # closed by the bot: no pause
    assert len(world.sync_pulls()) == 1


@pytest.mark.parametrize(
    "method, step",
    [
        ("POST", "/git/blobs"),
        ("POST", "/git/trees"),
        ("POST", "/git/commits"),
        ("POST", "/git/refs"),
        ("POST", "/pulls"),
    ],
)
def test_a_run_killed_between_two_calls_is_finished_by_the_next(world, method, step) -> None:
    world.github.fail(method, f"/repos/{REPO}{step}", 502)
    with pytest.raises(GithubException):
        world.sync()
    assert world.sync_pulls() == []
    report = world.sync()
    assert report.action == "created"
    assert len(world.sync_pulls()) == 1
    assert len(world.branch_commits()) == 1
    if step == "/pulls":
        # The commit the killed run pushed is reused, not made again.
        assert [w for w in world.writes() if w[1].endswith("/git/commits")] == [
            ("POST", f"/repos/{REPO}/git/commits")
        ]
    assert world.sync().action == "unchanged"


def test_a_pr_edit_lost_after_the_commit_is_made_good_by_the_next_run(world) -> None:
    world.sync()
    world.lesson("Pin the tool versions the CI installs")
    number = world.sync_pulls()[0]["number"]
    world.github.fail("PATCH", f"/repos/{REPO}/pulls/{number}", 502)
    with pytest.raises(GithubException):
        world.sync()
    assert "(+3, -0)" not in world.sync_pulls()[0]["title"]
    commits = world.github.commits_on(REPO, BRANCH)
    report = world.sync()
    assert report.action == "unchanged"  # the branch holds the block: nothing committed...
    assert world.github.commits_on(REPO, BRANCH) == commits
    assert "(+3, -0)" in world.sync_pulls()[0]["title"]  # ...and the description caught up


def test_a_dry_run_prints_the_block_and_diff_and_writes_nothing(world) -> None:
    world.github.put_file(REPO, "AGENTS.md", b"# Team\n\nOur rules.\n")
    report = world.sync(dry_run=True)
    assert report.action == "dry_run"
    assert report.block is not None and report.block.startswith(START)
    assert report.diff is not None
    assert report.diff.startswith("--- a/AGENTS.md\n+++ b/AGENTS.md\n")
    assert "+- [pb-1] Dedupe webhook retries by the delivery id\n" in report.diff
    assert " Our rules.\n" in report.diff
    assert report.message == (
        f"{REPO}: dry run: would open a PR from {BRANCH}: 2 lessons (+2, -0); nothing written"
    )
    assert world.writes() == []
    assert world.state() is None
    # Nor is the settings file it read kept: a dry run leaves the database as it found it.
    assert repo_settings.cached(world.loop.engine, REPO) is None


def test_a_dry_run_diff_says_when_a_file_ends_without_a_line_break(world) -> None:
    world.github.put_file(REPO, "AGENTS.md", b"# Team\n\nOur rules.")
    diff = world.sync(dry_run=True).diff or ""
    # As git prints it: the old last line is not run into the line that follows it.
    assert "-Our rules.\n\\ No newline at end of file\n+Our rules.\n" in diff
    assert diff.endswith("<!-- playbook-bot:end -->\n\\ No newline at end of file\n")


def test_malformed_markers_fail_in_one_line_and_nothing_is_written(world) -> None:
    world.github.put_file(REPO, "AGENTS.md", f"# Team\n{START}\nno end\n".encode())
    with pytest.raises(block.BlockProblem) as problem:
        world.sync()
    message = str(problem.value)
    assert "\n" not in message
    assert message.startswith(f"{REPO}: AGENTS.md has {START} on line 2 but no {END} line;")
    assert world.writes() == []
    row = world.state()
    assert row is not None and (row.last_result or "").startswith("failed: AGENTS.md has")


def test_a_repository_without_agents_md_enabled_is_left_alone(loop) -> None:
    world = world_for(loop)
    world.github.put_file(REPO, ".github/playbook-bot.yml", b"comment: true\n")
    report = world.sync()
    assert report.action == "disabled"
    assert "`agents_md: {enabled: true}`" in report.message
    assert world.writes() == [] and world.state() is None


def test_a_pause_holds_until_its_day_or_a_resume(world) -> None:
    start = datetime(2026, 11, 3, 10, tzinfo=UTC)
    clock.set_clock(lambda: start)
    with transaction(world.loop.engine) as session:
        syncs.pause(session, REPO, "AGENTS.md", start + timedelta(days=30), "closed by @alice")
    report = world.sync()
    assert report.action == "paused"
    assert report.message == (
        f"{REPO}: sync paused until 2026-12-03 (closed by @alice); "
        f"`playbook-bot agents-md sync --repo {REPO} --resume` syncs now"
    )
    assert world.writes() == []
    assert world.sync(dry_run=True, ignore_pause=True).action == "dry_run"
    clock.set_clock(lambda: start + timedelta(days=31))
    assert world.sync().action == "created"
    row = world.state()
    assert row is not None and row.paused_until is None


def test_a_close_no_webhook_told_of_still_pauses_the_sync(world) -> None:
    world.github.permissions[(REPO, "alice")] = "write"
    number = world.sync().pull_number
    assert number is not None
    world.github.pulls[(REPO, number)]["state"] = "closed"
    world.github.issues[(REPO, number)].update(
        state="closed", closed_by={"login": "alice", "type": "User"}
    )
    report = world.sync()
    assert (report.action, report.paused_reason) == ("paused", "closed unmerged by @alice")
    assert len(world.sync_pulls()) == 1


def test_the_scheduled_job_syncs_each_enabled_repository_and_skips_a_failing_one(world) -> None:
    other = "Codertocat/Broken"
    world.github.add_repo(other)
    world.github.put_file(other, ".github/playbook-bot.yml", b"agents_md:\n  enabled: true\n")
    world.github.put_file(other, "AGENTS.md", f"{END}\n{START}\n".encode())
    off = "Codertocat/Off"
    world.github.add_repo(off)
    # Deliveries from the three repositories made the bot read their settings.
    for repo in (REPO, other, off):
        agents_md.repo_settings.effective(world.services, repo, 777)
    counts = agents_md.sync_all(world.loop.engine, world.loop.settings)
    assert counts == {"created": 1, "disabled": 1, "failed": 1}
    assert len(world.sync_pulls()) == 1
    with transaction(world.loop.engine) as session:
        broken = session.get(RuleFileSync, other)
        assert broken is not None and (broken.last_result or "").startswith("failed:")


def test_the_pr_description_pings_nobody_and_links_nothing(world) -> None:
    world.lesson(
        "Ask @octocat first; see [the runbook](https://evil.example/x) | ![p](https://t.example/p.png)"
    )
    world.sync()
    body = world.sync_pulls()[-1]["body"]
    assert "@octocat" not in body and "@\u200boctocat" in body
    assert "](https://" not in body and "\\[the runbook\\]" in body

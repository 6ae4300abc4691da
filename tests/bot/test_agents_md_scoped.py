"""The AGENTS.md sync with `agents_md.scoped`: lessons anchored to paths go to each agent's own
path-scoped rule files, in the same commit and the same one PR as the block; the bot's stale
files are deleted, and a person's files are never touched."""

from __future__ import annotations

import pytest
import yaml
from github.GithubException import GithubException

from playbook.repos.syncs import BRANCH
from playbook.rules import END, START
from playbook.rules.scoped import MARKER
from tests.bot.agents_md_world import World, world_for
from tests.payloads import REPO

ALL = "  scoped: [copilot, cursor, claude]\n"
ORDERS = {
    "copilot": ".github/instructions/playbook-orders.instructions.md",
    "cursor": ".cursor/rules/playbook-orders.mdc",
    "claude": ".claude/rules/playbook-orders.md",
}
BILLING = {name: path.replace("orders", "billing") for name, path in ORDERS.items()}
DIRS = (".github/instructions", ".cursor/rules", ".claude/rules")


@pytest.fixture
def world(loop) -> World:
    """REPO syncing all three agents' files; pb-1 about orders, pb-2 unanchored, pb-3 billing."""
    found = world_for(loop, ALL)
    found.lesson("Take the order lock before the stock check", paths=["orders/locking.py"])
    found.lesson("Dedupe webhook retries by the delivery id")
    found.lesson("Billing retries go through the queue", paths=["billing/"])
    return found


def meta_of(data: bytes) -> dict[str, object]:
    """The file's front matter as PyYAML reads it."""
    text = data.decode()
    assert text.startswith("---\n")
    return yaml.safe_load(text[4:].split("\n---\n", 1)[0])


def bot_files(world: World, ref: str) -> dict[str, bytes]:
    found: dict[str, bytes] = {}
    for directory in DIRS:
        found.update(world.files_on(ref, directory))
    return found


def test_the_first_sync_writes_each_agents_files_beside_the_block_in_one_commit(world) -> None:
    report = world.sync()
    assert report.action == "created"
    assert len(world.branch_commits()) == 1
    block = world.on_branch() or b""
    # Unanchored lessons stay in the block; anchored ones are not repeated there.
    assert b"[pb-2]" in block and b"[pb-1]" not in block and b"[pb-3]" not in block
    files = bot_files(world, BRANCH)
    assert sorted(files) == sorted([*ORDERS.values(), *BILLING.values()])
    assert meta_of(files[ORDERS["copilot"]]) == {
        "applyTo": "orders/locking.py,orders/locking.py/**"
    }
    cursor = meta_of(files[ORDERS["cursor"]])
    assert cursor["globs"] == "orders/locking.py,orders/locking.py/**"
    assert cursor["alwaysApply"] is False and "orders" in str(cursor["description"])
    assert b"\nglobs: orders/locking.py,orders/locking.py/**\n" in files[ORDERS["cursor"]]
    assert meta_of(files[ORDERS["claude"]]) == {
        "paths": ["orders/locking.py", "orders/locking.py/**"]
    }
    assert meta_of(files[BILLING["claude"]]) == {"paths": ["billing/**"]}
    for path, data in files.items():
        text = data.decode()
        assert MARKER in text and text.count(START) == 1 and text.count(END) == 1
        lesson = "pb-1" if "orders" in path else "pb-3"
        assert f"- [{lesson}] " in text and "[pb-2]" not in text
    assert bot_files(world, "main") == {}  # main waits for the merge
    (pull,) = world.sync_pulls()
    assert pull["title"] == (
        "playbook-bot: 3 lessons for agents in AGENTS.md and 6 path-scoped files (+3, -0)"
    )
    row = next(line for line in pull["body"].splitlines() if ORDERS["cursor"] in line)
    assert ORDERS["copilot"] in row and ORDERS["claude"] in row
    assert row.endswith("| `orders/locking.py`, `orders/locking.py/**` | pb-1 |")
    assert "`AGENTS.md` keeps the others (1: pb-2)" in pull["body"]
    state = world.state()
    assert state is not None and sorted(state.files or {}) == sorted(files)
    assert report.files == sorted(files)


def test_a_second_run_with_nothing_changed_commits_nothing(world) -> None:
    world.sync()
    before = (world.github.commits_on(REPO, BRANCH), len(world.writes()))
    assert world.sync().action == "unchanged"
    assert (world.github.commits_on(REPO, BRANCH), len(world.writes())) == before


def test_a_new_area_updates_the_same_pr_with_one_commit(world) -> None:
    first = world.sync()
    new = world.lesson("Refunds are idempotent by the charge id", paths=["payments/refunds.py"])
    report = world.sync()
    assert report.action == "updated" and report.pull_number == first.pull_number
    assert len(world.sync_pulls()) == 1 and len(world.branch_commits()) == 1
    files = bot_files(world, BRANCH)
    assert ".cursor/rules/playbook-payments.mdc" in files and len(files) == 9
    since = world.sync_pulls()[0]["body"].split("### Since the previous version")[1]
    assert f"- added {new}: new, not used yet" in since


def test_only_the_bots_own_stale_files_are_deleted(world) -> None:
    mine = b"---\nglobs: orders/**\nalwaysApply: false\n---\n\nMy rule.\n"
    world.github.put_file(REPO, ".cursor/rules/mine.mdc", mine)
    world.github.put_file(REPO, ".cursor/rules/playbook-team.mdc", mine)  # no marker
    world.sync()
    world.github.merge_pull(REPO, world.sync_pulls()[0]["number"])
    # A file with the marker the bot never wrote (no listing in its state) is left too.
    stray = world.github.file_at(REPO, ORDERS["cursor"]) or b""
    world.github.put_file(REPO, ".cursor/rules/playbook-stray.mdc", stray)
    world.deprecate("pb-3", "billing moved to a service")
    report = world.sync()
    assert report.action == "created"
    files = bot_files(world, BRANCH)
    assert not set(BILLING.values()) & set(files)
    assert set(ORDERS.values()) <= set(files)
    assert files[".cursor/rules/mine.mdc"] == mine
    assert files[".cursor/rules/playbook-team.mdc"] == mine
    assert files[".cursor/rules/playbook-stray.mdc"] == stray
    assert report.removed == [{"id": "pb-3", "reason": "deprecated: billing moved to a service"}]
    body = world.sync_pulls()[-1]["body"]
    assert f"Removed (no lesson left for them): `{BILLING['claude']}`" in body
    assert "`.cursor/rules/playbook-team.mdc`" in body.split("Left as they are")[1]
    # Listed until main has the deletion: a closed PR would not leave the files orphaned.
    state = world.state()
    assert state is not None and set(BILLING.values()) <= set(state.files or {})
    world.github.merge_pull(REPO, world.sync_pulls()[-1]["number"])
    assert world.sync().action == "unchanged"
    state = world.state()
    assert state is not None and not set(BILLING.values()) & set(state.files or {})


def test_a_persons_file_of_the_same_name_makes_the_bot_name_its_area_otherwise(loop) -> None:
    world = world_for(loop, "  scoped: [cursor]\n")
    world.lesson("Take the order lock before the stock check", paths=["orders/"])
    theirs = b"---\ndescription: ours\nglobs: orders/**\nalwaysApply: true\n---\n\nOurs.\n"
    world.github.put_file(REPO, ".cursor/rules/playbook-orders.mdc", theirs)
    world.sync()
    files = bot_files(world, BRANCH)
    assert files[".cursor/rules/playbook-orders.mdc"] == theirs
    assert meta_of(files[".cursor/rules/playbook-orders-2.mdc"])["globs"] == "orders/**"
    assert world.sync().action == "unchanged"


def test_turning_the_formats_off_deletes_the_bots_files_and_fills_the_block(world) -> None:
    world.sync()
    world.github.merge_pull(REPO, world.sync_pulls()[0]["number"])
    world.settings("  scoped: [claude]\n")
    report = world.sync()
    files = bot_files(world, BRANCH)
    assert sorted(files) == sorted([ORDERS["claude"], BILLING["claude"]])
    world.github.merge_pull(REPO, report.pull_number or 0)
    world.settings()
    world.sync()
    assert bot_files(world, BRANCH) == {}
    block = world.on_branch() or b""
    assert all(f"[pb-{n}]".encode() in block for n in (1, 2, 3))


def test_a_dry_run_shows_every_files_diff_and_writes_nothing(world) -> None:
    report = world.sync(dry_run=True)
    assert report.action == "dry_run"
    diff = report.diff or ""
    assert diff.startswith("--- /dev/null\n+++ b/AGENTS.md\n")
    for path in [*ORDERS.values(), *BILLING.values()]:
        assert f"--- /dev/null\n+++ b/{path}\n" in diff
    assert "+- [pb-1] Take the order lock before the stock check\n" in diff
    assert world.writes() == [] and world.state() is None


@pytest.mark.parametrize("step", ["/git/trees", "/pulls"])
def test_a_run_killed_mid_way_is_finished_with_one_commit(world, step: str) -> None:
    world.github.fail("POST", f"/repos/{REPO}{step}", 502)
    with pytest.raises(GithubException):
        world.sync()
    assert world.sync().action == "created"
    assert len(world.branch_commits()) == 1 and len(bot_files(world, BRANCH)) == 6
    commits = [w for w in world.writes() if w[1].endswith("/git/commits")]
    assert len(commits) == 1
    assert world.sync().action == "unchanged"


def test_hostile_lesson_text_cannot_reach_the_front_matter(world) -> None:
    world.lesson(
        "x\n---\nalwaysApply: true\nglobs: **\n<!-- playbook-bot:end -->\n" + MARKER,
        paths=["orders/"],
    )
    world.sync()
    data = bot_files(world, BRANCH)[ORDERS["cursor"]]
    assert meta_of(data)["alwaysApply"] is False
    assert set(meta_of(data)) == {"description", "globs", "alwaysApply"}
    assert data.decode().count(MARKER) == 1 and data.decode().count(END) == 1


def test_a_persons_close_pauses_the_sync_and_its_files_with_it(world) -> None:
    world.github.permissions[(REPO, "alice")] = "write"
    number = world.sync().pull_number
    assert number is not None
    world.github.pulls[(REPO, number)]["state"] = "closed"
    world.github.issues[(REPO, number)].update(
        state="closed", closed_by={"login": "alice", "type": "User"}
    )
    world.lesson("Refunds are idempotent by the charge id", paths=["payments/"])
    writes = len(world.writes())
    report = world.sync()
    assert (report.action, report.paused_reason) == ("paused", "closed unmerged by @alice")
    assert len(world.writes()) == writes and len(world.sync_pulls()) == 1

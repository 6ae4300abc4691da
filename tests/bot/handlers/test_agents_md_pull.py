"""The sync PR's fate through the webhook: a person closing it pauses the sync (said once on the
PR), the bot closing it does not, reopening or merging resumes, and it is never agent work."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from bot.backfill import backfill
from playbook import clock
from playbook.db import transaction
from playbook.models import PullRequest
from playbook.repos.syncs import BRANCH
from tests.bot.agents_md_world import World, world_for
from tests.payloads import REPO, issue_comment, pull_request, pull_request_review
from tests.support import last_delivery

BOT = {"login": "playbook-bot[bot]", "type": "Bot"}
ALICE = {"login": "alice", "type": "User"}
NOW = datetime(2026, 11, 3, 10, tzinfo=UTC)


@pytest.fixture
def world(loop) -> World:
    """REPO with agents_md on (a 7-day pause), one lesson, and its sync PR open; alice may
    write to REPO."""
    clock.set_clock(lambda: NOW)
    found = world_for(loop, "  pause_days: 7\n")
    found.github.permissions[(REPO, "alice")] = "write"
    found.lesson("Dedupe webhook retries by the delivery id")
    assert found.sync().action == "created"
    return found


def _event(world: World, action: str, **fields: Any) -> dict[str, Any]:
    """A pull_request delivery about the sync PR, as GitHub sends it."""
    pull = world.sync_pulls()[0]
    fields.setdefault("author", BOT)
    payload = pull_request(
        action, number=pull["number"], branch=BRANCH, body=pull["body"], **fields
    )
    world.loop.github_event(f"pull_request.{action}", payload)
    world.loop.process()
    return payload


def _comments(world: World) -> list[str]:
    number = world.sync_pulls()[0]["number"]
    return [c["body"] for c in world.github.comments_on(REPO, number)]


def test_a_person_closing_the_sync_pr_pauses_it_and_says_so_once(world) -> None:
    payload = _event(world, "closed", sender=ALICE)
    row = world.state()
    assert row is not None
    assert clock.to_utc(row.paused_until) == NOW + timedelta(days=7)
    assert row.paused_reason == "closed unmerged by @alice"
    (comment,) = _comments(world)
    assert comment.startswith("@alice closed this pull request without merging it")
    assert "until 2026-11-10" in comment
    assert f"`playbook-bot agents-md sync --repo {REPO} --resume`" in comment
    assert "reopen or merge this pull request" in comment
    # GitHub delivers it again a day later: one pause, one comment.
    clock.set_clock(lambda: NOW + timedelta(days=1))
    world.loop.github_event("pull_request.closed", payload)
    world.loop.process()
    assert len(_comments(world)) == 1
    again = world.state()
    assert again is not None and clock.to_utc(again.paused_until) == NOW + timedelta(days=7)
    report = world.sync()
    assert (report.action, report.paused_reason) == ("paused", "closed unmerged by @alice")


def test_the_bot_closing_its_own_sync_pr_pauses_nothing(world) -> None:
    _event(world, "closed", sender=BOT)
    row = world.state()
    assert row is not None and row.paused_until is None
    assert _comments(world) == []
    assert last_delivery(world.loop.engine, "pull_request").status == "ignored"


def test_reopening_the_closed_sync_pr_resumes_the_sync(world) -> None:
    _event(world, "closed", sender=ALICE)
    _event(world, "reopened", sender=ALICE)
    row = world.state()
    assert row is not None and row.paused_until is None
    assert world.sync().action == "unchanged"


def test_a_merged_sync_pr_is_recorded_and_adds_no_cites_nor_outcome(world) -> None:
    pull = world.sync_pulls()[0]
    assert "| pb-1 |" in pull["body"]
    _event(world, "opened", sender=BOT)
    world.github.pull_commits[(REPO, pull["number"])] = ["playbook-bot: pb-1"]
    _event(world, "synchronize", sender=BOT)
    world.github.merge_pull(REPO, pull["number"])
    _event(world, "closed", sender=ALICE, merged=True)
    assert world.cites() == 0
    with transaction(world.loop.engine) as session:
        assert session.get(PullRequest, f"{REPO}#{pull['number']}") is None
    row = world.state()
    assert row is not None and row.last_result == f"PR #{pull['number']} merged"
    assert _comments(world) == []
    assert world.sync().action == "unchanged"


def test_comments_and_reviews_on_the_sync_pr_are_no_cites(world) -> None:
    number = world.sync_pulls()[0]["number"]
    comment = issue_comment("pb-1 should stay, thanks", "alice", on_pr=True)
    comment["issue"]["number"] = number
    world.loop.github_event("issue_comment.created", comment)
    opened = pull_request("opened", number=number, branch=BRANCH, author=BOT)
    world.loop.github_event(
        "pull_request_review.submitted", pull_request_review(opened, "Good list, [pb-1].")
    )
    world.loop.process()
    assert world.cites() == 0


def test_an_agents_pr_citing_a_synced_lesson_still_cites_it(world) -> None:
    world.loop.github_event(
        "pull_request.opened",
        pull_request("opened", number=90, body="Fixes CTMS-4337. Followed [pb-1]."),
    )
    world.loop.process()
    assert world.cites() == 1


def test_backfill_walks_past_a_merged_sync_pr(world) -> None:
    pull = world.sync_pulls()[0]
    world.github.merge_pull(REPO, pull["number"])
    report = backfill(world.services, REPO, timedelta(days=30))
    assert report.ignored == [f"{REPO}#{pull['number']} is the bot's AGENTS.md sync PR"]
    assert (report.seen, world.cites()) == (0, 0)

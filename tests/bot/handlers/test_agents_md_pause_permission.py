"""Only a person with write access pauses the AGENTS.md sync by closing its PR, as GitHub's
permission API answers for the verified sender: a close by triage or read access pauses nothing
(the bot says so once, and its next sync opens a new PR), through the webhook or found later."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from playbook import clock
from playbook.repos.syncs import BRANCH
from tests.bot.agents_md_world import World, world_for
from tests.payloads import REPO, pull_request

BOT = {"login": "playbook-bot[bot]", "type": "Bot"}
BOB = {"login": "bob", "type": "User"}
NOW = datetime(2026, 11, 3, 10, tzinfo=UTC)
# Roles as GitHub names them; the fake answers the legacy level GitHub derives from each.
WRITERS = ("write", "maintain", "admin")
OTHERS = ("triage", "read", "none")


@pytest.fixture
def world(loop) -> World:
    """REPO with agents_md on (a 7-day pause), one lesson, and its sync PR open."""
    clock.set_clock(lambda: NOW)
    found = world_for(loop, "  pause_days: 7\n")
    found.lesson("Dedupe webhook retries by the delivery id")
    assert found.sync().action == "created"
    return found


def _number(world: World) -> int:
    return world.sync_pulls()[0]["number"]


def _close_on_github(world: World, closer: dict[str, Any]) -> None:
    """The sync PR closed on (fake) GitHub by ``closer``, as the API then shows it."""
    number = _number(world)
    world.github.pulls[(REPO, number)]["state"] = "closed"
    world.github.issues[(REPO, number)].update(state="closed", closed_by=closer)


def _deliver(world: World, action: str, sender: dict[str, Any]) -> dict[str, Any]:
    """A signed pull_request delivery about the sync PR, sent by ``sender``."""
    pull = world.sync_pulls()[0]
    payload = pull_request(
        action, number=pull["number"], branch=BRANCH, body=pull["body"], author=BOT, sender=sender
    )
    world.loop.github_event(f"pull_request.{action}", payload)
    world.loop.process()
    return payload


def _comments(world: World) -> list[str]:
    return [c["body"] for c in world.github.comments_on(REPO, _number(world))]


def _paused(world: World) -> bool:
    row = world.state()
    assert row is not None
    return row.paused_until is not None


@pytest.mark.parametrize("role", OTHERS)
def test_a_close_without_write_access_pauses_nothing_and_the_sync_goes_on(world, role) -> None:
    world.github.permissions[(REPO, "bob")] = role
    _close_on_github(world, BOB)
    payload = _deliver(world, "closed", BOB)
    assert not _paused(world)
    (comment,) = _comments(world)
    assert comment.startswith("@bob closed this pull request, but only people with write access")
    # Delivered again: still one comment, still no pause.
    world.loop.github_event("pull_request.closed", payload)
    world.loop.process()
    assert len(_comments(world)) == 1 and not _paused(world)
    # The next sync is not paused: it opens a new PR with the lessons.
    report = world.sync()
    assert report.action == "created" and report.pull_number != payload["number"]
    assert len(world.sync_pulls()) == 2


@pytest.mark.parametrize("role", WRITERS)
def test_a_close_with_write_access_pauses_the_sync(world, role) -> None:
    world.github.permissions[(REPO, "bob")] = role
    _close_on_github(world, BOB)
    _deliver(world, "closed", BOB)
    row = world.state()
    assert row is not None and clock.to_utc(row.paused_until) == NOW + timedelta(days=7)
    assert row.paused_reason == "closed unmerged by @bob"
    (comment,) = _comments(world)
    assert comment.startswith("@bob closed this pull request without merging it")
    assert world.sync().action == "paused"


@pytest.mark.parametrize(("role", "action"), [("triage", "created"), ("maintain", "paused")])
def test_a_close_no_webhook_told_of_pauses_only_for_write_access(world, role, action) -> None:
    world.github.permissions[(REPO, "bob")] = role
    _close_on_github(world, BOB)
    assert world.sync().action == action
    assert _paused(world) == (action == "paused")


def test_a_reopen_without_write_access_leaves_a_writers_pause(world) -> None:
    world.github.permissions[(REPO, "alice")] = "write"
    world.github.permissions[(REPO, "bob")] = "triage"
    _close_on_github(world, {"login": "alice", "type": "User"})
    _deliver(world, "closed", {"login": "alice", "type": "User"})
    assert _paused(world)
    _deliver(world, "reopened", BOB)
    assert _paused(world) and world.sync().action == "paused"
    _deliver(world, "reopened", {"login": "alice", "type": "User"})
    assert not _paused(world)


def test_the_description_says_who_can_pause(world) -> None:
    body = world.sync_pulls()[0]["body"]
    assert "only when made by someone with write access to this repository" in body

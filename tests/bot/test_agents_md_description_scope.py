"""The sync PR's description is public: lessons named in the file's old block that the repository
cannot see (another owner's, a Jira project's, or none at all) read alike, with no status, reason,
scope, text or replacement; a visible lesson says why it left, naming only visible replacements."""

from __future__ import annotations

from typing import Any

import pytest

from playbook.db import transaction
from playbook.models import Bullet
from playbook.repos.syncs import GONE
from playbook.rules import END, START
from tests.bot.agents_md_world import World, world_for
from tests.payloads import REPO

VICTIM = "victim/secret"
JIRA = "CTMS"
# Words of other scopes that must never reach the public description.
SECRETS = ("VICTIMREASON", "VICTIMTEXT", "JIRAREASON", "JIRATEXT", VICTIM, JIRA)


def _set(world: World, bullet_id: str, **fields: Any) -> None:
    """Fields written straight to the row: states older data holds, whatever the rules now."""
    with transaction(world.loop.engine) as session:
        row = session.get(Bullet, bullet_id)
        assert row is not None
        for name, value in fields.items():
            setattr(row, name, value)


@pytest.fixture
def world(loop) -> World:
    """REPO with agents_md on and one lesson of its own."""
    found = world_for(loop)
    found.lesson("Dedupe webhook retries by the delivery id")
    return found


def _old_block(*ids: str) -> bytes:
    lines = [START, *(f"- [{bullet_id}] an old lesson" for bullet_id in ids), END]
    return ("# Team\n\n" + "\n".join(lines) + "\n").encode()


def test_lessons_the_repository_cannot_see_are_described_as_gone(world) -> None:
    victim = world.lesson("VICTIMTEXT the payroll DB is at db.internal", scope=VICTIM)
    world.deprecate(victim, "VICTIMREASON leaked the payroll DB password")
    jira = world.lesson("JIRATEXT the CTMS export", scope=JIRA)
    world.deprecate(jira, "JIRAREASON wrong for the export")
    moved = world.lesson("VICTIMTEXT once ours, now the victim's")
    _set(world, moved, scope=VICTIM)
    replaced = world.lesson("Retry with backoff")
    # Superseded by another owner's lesson, its reason naming it (as supersede writes it).
    _set(
        world,
        replaced,
        status="superseded",
        superseded_by=victim,
        demoted_reason=f"superseded by {victim}",
    )
    world.github.put_file(REPO, "AGENTS.md", _old_block(victim, jira, moved, replaced, "pb-999"))
    report = world.sync()
    body = world.sync_pulls()[-1]["body"]
    for secret in SECRETS:
        assert secret not in body and secret not in str(report.removed)
    reasons = {row["id"]: row["reason"] for row in report.removed}
    # Another owner's, a Jira project's and a moved lesson read exactly like no lesson at all.
    assert reasons == {
        victim: GONE,
        jira: GONE,
        moved: GONE,
        "pb-999": GONE,
        replaced: "superseded",
    }
    for bullet_id in (victim, jira, moved, "pb-999"):
        assert f"| {bullet_id} | {GONE} |" in body
    assert f"| {replaced} | superseded |" in body
    assert f"by {victim}" not in body


def test_a_visible_lesson_says_why_it_left_and_a_missing_reason_is_not_none(world) -> None:
    first = world.sync()
    replacement = world.lesson("Retry with backoff and a key", scope="global")
    own = world.lesson("Retry with backoff")
    deprecated = world.lesson("Pin the CI tools")
    world.deprecate(deprecated, "the CI pins them itself")
    _set(world, own, status="superseded", superseded_by=replacement, demoted_reason=None)
    world.github.put_file(REPO, "AGENTS.md", _old_block(own, deprecated))
    report = world.sync()
    assert report.pull_number == first.pull_number
    reasons = {row["id"]: row["reason"] for row in report.removed}
    assert reasons == {
        own: f"superseded by {replacement}",
        deprecated: "deprecated: the CI pins them itself",
    }
    body = world.sync_pulls()[-1]["body"]
    assert "None" not in body
    assert f"| {own} | superseded by {replacement} |" in body


def test_a_lesson_moved_away_since_the_previous_version_is_gone_there_too(world) -> None:
    first = world.sync()
    assert first.action == "created"
    _set(world, "pb-1", scope=VICTIM, demoted_reason="VICTIMREASON")
    world.lesson("Pin the tool versions the CI installs")
    assert world.sync().action == "updated"
    body = world.sync_pulls()[-1]["body"]
    since = body.split("### Since the previous version of this pull request")[1]
    assert f"- removed pb-1: {GONE}" in since
    for secret in SECRETS:
        assert secret not in body

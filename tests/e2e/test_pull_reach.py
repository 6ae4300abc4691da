"""Another owner's pull request never changes a lesson: no cite, no link, no outcome.

The whole bot against the fake GitHub. The PRs are of ``Codertocat/Hello-World`` (REPO), whose
sender has write access there: they name a lesson of ``victim/secret`` (another owner) and say
``Fixes victim/secret#41``. Merged or closed unmerged, the victim's lessons keep their status,
counters and history. A sibling repository of the same owner and a Jira project are worked on
from REPO: their lessons are cited, approved and demoted as before.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import Engine, func, select

from playbook.db import transaction
from playbook.lessons import lifecycle
from playbook.models import Bullet, Revision, TicketLink, UsageEvent
from tests.loop_harness import REPO, Loop
from tests.payloads import issue_comment, pull_request

VICTIM = "victim/secret"
SIBLING = "Codertocat/Spoon-Knife"  # same owner as REPO: one installation, one trust domain


@dataclass(frozen=True)
class Seeded:
    """The ids of one scope's lessons: one cited, one proposed and one active from its ticket."""

    cited: str
    proposed: str
    active: str


# Words unlike each other's, so no lesson is a near-duplicate of another in its scope.
TEXTS = {
    "Victim": ("pin the client library", "rotate signing keys monthly", "never log payroll paths"),
    "Victim-Jira": ("vendor fonts locally", "batch invoice emails nightly", "shard audit tables"),
    "Sibling": ("cache avatars at the edge", "retry uploads thrice", "lint shell scripts"),
    "Jira": ("dedupe webhook events", "lock orders once per retry", "purge the CDN by tag"),
}


def seed_scope(engine: Engine, scope: str, ticket: str, word: str) -> Seeded:
    """Three lessons of ``scope``, the last two learned from ``ticket``."""
    ids: list[str] = []
    with transaction(engine) as session:
        for status, text in zip(("active", "proposed", "active"), TEXTS[word], strict=True):
            added = lifecycle.add(
                session,
                text,
                learned_from=f"{ticket}0" if not ids else ticket,  # the cited one: another ticket
                scope=scope,
                actor="seed",
                status=status,
            )
            assert added.created, text
            ids.append(added.bullet.id)
    return Seeded(*ids)


def snapshot(engine: Engine, bullet_id: str) -> tuple[object, ...]:
    """What a lesson's owner would notice changed: status, counters, history, events."""
    with transaction(engine) as session:
        lesson = session.get(Bullet, bullet_id)
        assert lesson is not None
        revisions = session.scalar(
            select(func.count()).select_from(Revision).where(Revision.bullet_id == bullet_id)
        )
        events = session.scalar(
            select(func.count()).select_from(UsageEvent).where(UsageEvent.bullet_id == bullet_id)
        )
        return (
            lesson.status,
            lesson.demoted_reason,
            lesson.cites,
            lesson.cites_success,
            lesson.cites_failure,
            revisions,
            events,
        )


def status(engine: Engine, bullet_id: str) -> str:
    with transaction(engine) as session:
        lesson = session.get(Bullet, bullet_id)
        assert lesson is not None
        return lesson.status


def cites_of(engine: Engine, bullet_id: str) -> list[str | None]:
    with transaction(engine) as session:
        return list(
            session.scalars(
                select(UsageEvent.pr_key).where(
                    UsageEvent.bullet_id == bullet_id, UsageEvent.kind == "cited"
                )
            )
        )


def linked(engine: Engine) -> set[str]:
    with transaction(engine) as session:
        return set(session.scalars(select(TicketLink.ticket_key)))


@pytest.fixture
def world(loop: Loop) -> dict[str, Seeded]:
    """The victim's, the sibling's and the Jira project's lessons, before any PR."""
    return {
        "victim": seed_scope(loop.engine, VICTIM, f"{VICTIM}#41", "Victim"),
        # Learned from a Jira ticket REPO's PR names, but kept in the victim's scope: a Jira
        # key is anyone's to write, so the ticket does not carry the PR into the victim's.
        "victim_jira": seed_scope(loop.engine, VICTIM, "CTMS-4337", "Victim-Jira"),
        "sibling": seed_scope(loop.engine, SIBLING, f"{SIBLING}#5", "Sibling"),
        "jira": seed_scope(loop.engine, "CTMS", "CTMS-4337", "Jira"),
    }


def body_citing(world: dict[str, Seeded]) -> str:
    ids = ", ".join(world[name].cited for name in ("victim", "victim_jira", "sibling", "jira"))
    return f"Fixes {VICTIM}#41. Fixes {SIBLING}#5.\n\nApplied {ids}."


@pytest.mark.parametrize("merged", [True, False], ids=["merged", "closed-unmerged"])
def test_another_owners_pr_changes_none_of_the_victims_lessons(
    loop: Loop, world: dict[str, Seeded], merged: bool
) -> None:
    body = body_citing(world)
    victims = [*vars(world["victim"]).values(), *vars(world["victim_jira"]).values()]
    before = {bullet_id: snapshot(loop.engine, bullet_id) for bullet_id in victims}
    loop.github_event("pull_request.opened", pull_request("opened", body=body))
    # A later comment citing the victim's lesson is no cite either.
    loop.github_event(
        "issue_comment.created",
        issue_comment(f"This follows {world['victim'].cited}.", "Codertocat", on_pr=True),
    )
    closed = pull_request("closed", body=body, merged=merged, at="2026-11-05T10:00:00Z")
    if merged:
        closed["pull_request"]["merged_by"] = closed["sender"]
    loop.github_event("pull_request.closed", closed)
    loop.process()

    # The victim's lessons: untouched, their counters and history as before.
    assert {bullet_id: snapshot(loop.engine, bullet_id) for bullet_id in victims} == before
    assert f"{VICTIM}#41" not in linked(loop.engine)
    # Nothing posted anywhere tells whether the victim's id exists.
    for call in loop.github.calls("POST"):
        assert world["victim"].cited not in str(call.json)

    # The same owner's sibling and the Jira project: as before the rule.
    assert {f"{SIBLING}#5", "CTMS-4337"} <= linked(loop.engine)
    for name in ("sibling", "jira"):
        lessons = world[name]
        assert cites_of(loop.engine, lessons.cited) == [f"{REPO}#2"]
        cited = snapshot(loop.engine, lessons.cited)
        assert cited[2:5] == ((1, 1, 0) if merged else (1, 0, 1))
        if merged:
            assert status(loop.engine, lessons.proposed) == "active"
            assert status(loop.engine, lessons.active) == "active"
        else:
            assert status(loop.engine, lessons.proposed) == "deprecated"
            assert status(loop.engine, lessons.active) == "deprecated"


def test_a_revert_of_the_pr_moves_none_of_the_victims_lessons(
    loop: Loop, world: dict[str, Seeded]
) -> None:
    body = body_citing(world)
    victims = [*vars(world["victim"]).values(), *vars(world["victim_jira"]).values()]
    before = {bullet_id: snapshot(loop.engine, bullet_id) for bullet_id in victims}
    first = pull_request("closed", body=body, merged=True, at="2026-11-05T10:00:00Z")
    first["pull_request"]["merged_by"] = first["sender"]
    loop.github_event("pull_request.closed", first)
    # The merge is handled before the revert arrives, as a day apart: in one batch the two run
    # in parallel lanes, and the loser of a status race is retried later (a Conflict).
    loop.process()
    revert = pull_request(
        "closed",
        number=3,
        title='Revert "CTMS-4337: dedupe webhook retries"',
        body=f"Reverts {REPO}#2",
        merged=True,
        at="2026-11-06T10:00:00Z",
    )
    revert["pull_request"]["merged_by"] = revert["sender"]
    loop.github_event("pull_request.closed", revert)
    loop.process()

    assert {bullet_id: snapshot(loop.engine, bullet_id) for bullet_id in victims} == before
    # The Jira project's lessons from the reverted work: demoted by the revert, as before.
    jira = world["jira"]
    assert status(loop.engine, jira.proposed) == "deprecated"
    assert snapshot(loop.engine, jira.cited)[2:5] == (1, 0, 1)


def test_backfill_goes_through_the_same_rule(loop: Loop, world: dict[str, Seeded]) -> None:
    from bot.backfill import backfill
    from bot.worker import Services

    body = body_citing(world)
    victims = [*vars(world["victim"]).values(), *vars(world["victim_jira"]).values()]
    before = {bullet_id: snapshot(loop.engine, bullet_id) for bullet_id in victims}
    when = (datetime.now(UTC) - timedelta(days=3)).strftime("%Y-%m-%dT%H:%M:%SZ")
    loop.github.add_pull(
        REPO,
        2,
        title="CTMS-4337 dedupe webhooks",
        body=body,
        state="closed",
        merged=True,
        merged_at=when,
        closed_at=when,
        updated_at=when,
    )
    report = backfill(Services(engine=loop.engine, settings=loop.settings), REPO, timedelta(days=9))
    assert report.merged == 1
    assert {bullet_id: snapshot(loop.engine, bullet_id) for bullet_id in victims} == before
    assert f"{VICTIM}#41" not in linked(loop.engine)
    for name in ("sibling", "jira"):
        assert snapshot(loop.engine, world[name].cited)[2:5] == (1, 1, 0)
        assert status(loop.engine, world[name].proposed) == "active"

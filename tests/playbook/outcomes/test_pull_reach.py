"""The one rule of what a PR may touch: its owner's repositories, Jira projects, global."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from sqlalchemy import Engine, select
from sqlalchemy.orm import Session

from playbook.db import transaction
from playbook.lessons import lifecycle
from playbook.models import UsageEvent
from playbook.outcomes import evidence, pull_reach, usage
from playbook.ratings import targets


@pytest.mark.parametrize(
    ("scope", "reached"),
    [
        ("acme/shop", True),  # its own repository
        ("acme/lib", True),  # a sibling: the same owner, one installation
        ("ACME/lib", True),  # GitHub compares owners case-insensitively
        ("global", True),
        ("CTMS", True),  # a Jira project: worked on from GitHub repositories
        ("victim/secret", False),
        ("acme-evil/shop", False),  # a prefix of the owner is another owner
        ("acm/shop", False),
    ],
)
def test_which_lesson_scopes_a_pr_of_acme_shop_may_touch(scope: str, reached: bool) -> None:
    assert pull_reach.may_touch("acme/shop", scope) is reached


@pytest.mark.parametrize(
    ("ticket", "linked"),
    [
        ("acme/shop#1", True),
        ("Acme/lib#3", True),
        ("CTMS-4337", True),
        ("victim/secret#41", False),
        ("acme-evil/shop#1", False),
    ],
)
def test_which_tickets_a_pr_of_acme_shop_may_link(ticket: str, linked: bool) -> None:
    assert pull_reach.may_link("acme/shop", ticket) is linked


@pytest.fixture
def session(engine: Engine) -> Iterator[Session]:
    with transaction(engine) as opened:
        yield opened


def add(session: Session, text: str, ticket: str, scope: str) -> str:
    return lifecycle.add(session, text, learned_from=ticket, scope=scope, actor="seed").bullet.id


def test_a_cite_of_another_owners_lesson_is_recorded_nowhere(session: Session) -> None:
    theirs = add(session, "Their rule about the payroll export", "victim/secret#1", "victim/secret")
    ours = add(session, "Our rule about webhook retries", "acme/lib#2", "acme/lib")
    assert evidence.cite(session, "acme/shop#5", None, f"Used {theirs} and {ours}", "pr") == 1
    # Refused exactly as an id that does not exist: nothing tells them apart.
    assert evidence.cite(session, "acme/shop#5", None, f"Again {theirs}", "comment") == 0
    assert evidence.cite(session, "acme/shop#5", None, "Unknown pb-999", "comment") == 0
    cited = session.scalars(select(UsageEvent.bullet_id).where(UsageEvent.kind == "cited"))
    assert list(cited) == [ours]


def test_an_outcome_settles_no_cite_of_another_owners_lesson_stored_before_the_rule(
    session: Session,
) -> None:
    theirs = add(session, "Their rule about the payroll export", "victim/secret#1", "victim/secret")
    ours = add(session, "Our rule about webhook retries", "acme/lib#2", "acme/lib")
    # As the bot recorded cites before this rule: any known id in the PR's text.
    usage.record(session, "cited", [theirs, ours], pr_key="acme/shop#5", consumer="github")
    settled = pull_reach.cites_in(session, "acme/shop#5")
    assert [session.get(UsageEvent, event).bullet_id for event in settled] == [ours]


def test_a_rating_never_rates_another_owners_lesson_shown_for_a_jira_ticket(
    session: Session,
) -> None:
    theirs = add(session, "Their rule about the payroll export", "CTMS-1", "victim/secret")
    jira = add(session, "The project's rule about retries", "CTMS-2", "CTMS")
    usage.record(session, "loaded", [theirs, jira], ticket_key="CTMS-4337", consumer="agent")
    assert [b.id for b in targets.to_rate(session, "acme/shop#5", ["CTMS-4337"])] == [jira]
    rated = targets.to_rate(session, "victim/secret#5", ["CTMS-4337"])
    assert {b.id for b in rated} == {theirs, jira}

"""Whose 👍/👎 on the bot's comment counts, and which one when a person left both."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from playbook.fit.reactions import Reaction, votes

AT = datetime(2026, 11, 1, tzinfo=UTC)


def test_thumbs_are_verdicts_other_reactions_are_not() -> None:
    said = [
        Reaction("ann", False, "+1", AT, 1),
        Reaction("bob", False, "-1", AT, 2),
        Reaction("cy", False, "heart", AT, 3),
        Reaction("dee", False, "confused", AT, 4),
    ]
    assert votes(said) == {"ann": True, "bob": False}


def test_bots_and_the_bot_itself_never_count() -> None:
    said = [
        Reaction("dependabot[bot]", True, "-1", AT, 1),
        Reaction("ci-runner", True, "-1", AT, 2),  # GitHub says type Bot
        Reaction("Playbook-Owner", False, "+1", AT, 3),  # the personal token's owner
        Reaction("ann", False, "+1", AT, 4),
    ]
    assert votes(said, own="playbook-owner") == {"ann": True}


def test_the_later_thumb_of_one_person_wins_whatever_the_order_listed() -> None:
    later = AT + timedelta(minutes=1)
    said = [
        Reaction("Ann", False, "+1", later, 9),
        Reaction("ann", False, "-1", AT, 5),  # logins compare without case
        Reaction("bob", False, "-1", AT, 7),
        Reaction("bob", False, "+1", AT, 8),  # same second: the later id
    ]
    assert votes(said) == {"Ann": True, "bob": True}


def test_nobody_reacted() -> None:
    assert votes([]) == {}

"""Ticket keys are parsed, not copied: a Jira key or `owner/name#N`, else no ticket at all."""

from __future__ import annotations

import pytest
from sqlalchemy import Engine, select

from playbook.db import transaction
from playbook.deliveries import inbox
from playbook.deliveries.tickets import checked, github_key, jira_key, problem, ticket_key
from playbook.models import Delivery
from tests.support import hang_guard

NUL = "\x00"


@pytest.mark.parametrize("key", ["PB-12", "CTMS-4337", "A-1", "AB_2-999999999999999999", "X9-7"])
def test_jira_keys_as_atlassian_allows_them(key: str) -> None:
    assert jira_key(key) == key and checked(key) == key


@pytest.mark.parametrize(
    "key",
    [
        f"PB-12{NUL}",
        f"P{NUL}B-12",
        "pb-12",
        "PB-0",
        "PB-012",
        "PB-12 ",
        "PB-12\n",
        "_B-1",
        "1B-1",
        "PB--1",
        "PB-1-2",
        "PB-1/comment",
        "\uff30\uff22-12",
        "PB-\u0661\u0662",  # Arabic-Indic digits are digits to str.isdigit, not to Jira
        "P" * 65 + "-1",
        "PB-" + "9" * 19,
        "",
        None,
        12,
    ],
)
def test_anything_else_is_no_jira_key(key: object) -> None:
    assert jira_key(key) is None
    assert problem("jira", {"issue": {"key": key}}) == (
        None if key is None else ("issue.key", "must be a Jira issue key such as PB-12")
    )


@pytest.mark.parametrize(
    ("repo", "number", "key"),
    [
        ("octo-org/app", 12, "octo-org/app#12"),
        ("Codertocat/Hello-World", 1, "Codertocat/Hello-World#1"),
        ("a/.github", 3, "a/.github#3"),
        ("o/r", 2**63 - 1, f"o/r#{2**63 - 1}"),
    ],
)
def test_github_keys(repo: str, number: int, key: str) -> None:
    assert github_key(repo, number) == key and checked(key) == key


@pytest.mark.parametrize(
    ("repo", "number"),
    [
        (f"octo/app{NUL}", 1),
        ("octo/app", True),
        ("octo/app", 0),
        ("octo/app", -1),
        ("octo/app", 2**63),
        ("octo/app", "1"),
        ("octo/..", 1),
        ("octo/.", 1),
        ("-octo/app", 1),
        ("octo/app/x", 1),
        ("octo", 1),
        ("octo/ app", 1),
        ("o" * 40 + "/app", 1),
        ("octo/" + "a" * 101, 1),
        ("octo/äpp", 1),
        (None, 1),
    ],
)
def test_anything_else_is_no_github_key(repo: object, number: object) -> None:
    assert github_key(repo, number) is None
    payload = {"repository": {"full_name": repo}, "issue": {"number": number}}
    assert ticket_key("github", payload) is None


@pytest.mark.parametrize(
    "key", [f"A-1{NUL}", "a/b#01", "a/b#", "a/b#1 ", "a/b#\u0661", "#1", "x", "a/b#" + "9" * 40]
)
def test_checked_drops_what_is_no_key(key: str) -> None:
    assert checked(key) is None


def test_huge_keys_are_refused_without_reading_them_all() -> None:
    with hang_guard(30, "checking huge keys"):
        for _ in range(200):
            assert jira_key("A" * 1_000_000 + "-1") is None
            assert github_key("a/" + "b" * 1_000_000, 1) is None
            assert checked("a/b#" + "1" * 1_000_000) is None


def test_the_inbox_stores_no_key_holding_a_nul_whoever_queues_the_row(engine: Engine) -> None:
    # PostgreSQL refuses NUL in text: the row is stored, without a ticket, not a DataError.
    with transaction(engine) as session:
        inbox.accept(
            session,
            source="playbook",
            event="model.rate",
            delivery_id="job-1",
            payload="{}",
            ticket_key=f"CTMS-1{NUL}",
        )
    with transaction(engine) as session:
        assert session.scalars(select(Delivery.ticket_key)).all() == [None]

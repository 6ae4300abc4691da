"""References in PR titles, branches and bodies: Jira keys, closed issues, bullet ids."""

from __future__ import annotations

import pytest

from playbook.outcomes.links import bullet_ids, pull_request_links


def test_bullet_ids_are_found_and_normalised() -> None:
    text = "Applied [pb-12] and PB-3; pb-12 again. Not pb-x, not apb-4, not pb-5a."
    assert bullet_ids(text) == ["pb-12", "pb-3"]
    assert bullet_ids(None) == []
    assert bullet_ids("see pb-007") == ["pb-7"]


def test_jira_keys_from_title_branch_and_body() -> None:
    links = pull_request_links(
        title="CTMS-4337: retry payment webhook",
        branch="ctms-4400-idempotency",
        body="Related to OPS-12 and CTMS-4337. Uses [pb-12].",
        repo="acme/shop",
    )
    assert links.jira_keys == ("CTMS-4337", "CTMS-4400", "OPS-12")
    assert "PB-12" not in links.tickets


def test_closing_keywords_win_over_loose_mentions() -> None:
    links = pull_request_links(
        title="Retry webhooks (see CTMS-1)",
        branch="feature/ctms-2",
        body="Fixes CTMS-3\n\nAlso touched CTMS-4.",
        repo="acme/shop",
    )
    assert links.jira_keys == ("CTMS-3",)


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ("Fixes #12", ("acme/shop#12",)),
        # Another owner's issue links nothing: its lessons are not this PR's to move
        # (playbook/outcomes/pull_reach.py). A sibling of the same owner links.
        ("closes: #12 and resolves other/lib#3", ("acme/shop#12",)),
        ("Fixes ACME/lib#3", ("ACME/lib#3",)),
        ("Mentions #12 without a keyword", ()),
        ("fixed #1, Fixed #1", ("acme/shop#1",)),
    ],
)
def test_closed_github_issues(body: str, expected: tuple[str, ...]) -> None:
    assert pull_request_links("title", "main", body, "acme/shop").closes == expected


def test_encodings_and_algorithms_are_not_keys() -> None:
    links = pull_request_links("Use UTF-8 and SHA-256", "utf-8-fix", "ISO-8601 dates", "a/b")
    assert links.jira_keys == ()

"""Webhook payloads for tests, built from the real deliveries in tests/fixtures.

Every test that sends GitHub or Jira a delivery, or stores one in the inbox, builds it here:
``fixture`` and ``fixture_body`` give a recorded delivery as it is (with the App's
installation), the named builders adapt one to what a test needs.
"""

from __future__ import annotations

import copy
import json
from typing import Any

from tests.support import FIXTURES

INSTALLATION = 777  # the App's installation on the fake GitHub
REPO = "Codertocat/Hello-World"  # the repository of the GitHub fixtures


def fixture(name: str) -> dict[str, Any]:
    """A fixture payload (``issues.opened``, ``jira.issue_created``) as a dict to adapt."""
    folder = "jira" if name.startswith("jira.") else "github"
    payload = json.loads((FIXTURES / folder / f"{name}.json").read_text())
    if isinstance(payload.get("installation"), dict) and not name.startswith("installation."):
        payload["installation"]["id"] = INSTALLATION
    return payload


def fixture_body(name: str, **changes: object) -> bytes:
    """A fixture payload as raw JSON bytes, its top-level fields replaced by ``changes``."""
    folder = "jira" if name.startswith("jira.") else "github"
    payload = json.loads((FIXTURES / folder / f"{name}.json").read_text())
    payload.update(changes)
    return json.dumps(payload).encode()


def bare_issue(number: int, action: str = "opened", repo: str = "octo/app") -> str:
    """An ``issues`` payload about one ticket, with only the fields lanes and handlers read."""
    return json.dumps(
        {"action": action, "issue": {"number": number}, "repository": {"full_name": repo}}
    )


def pull_request(
    action: str,
    *,
    number: int = 2,
    title: str = "CTMS-4337: dedupe webhook retries",
    body: str = "",
    merged: bool = False,
    at: str = "2026-11-03T10:00:00Z",
    branch: str = "feature/retries",
    sender: dict[str, Any] | None = None,
    author: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A ``pull_request`` delivery of ``action`` about PR ``number`` of REPO, last changed
    ``at`` (closed then, and merged if ``merged``), opened by ``author``, sent by ``sender``."""
    closed = action == "closed"
    payload = copy.deepcopy(fixture("pull_request.closed" if closed else "pull_request.opened"))
    payload["action"] = action
    payload["number"] = number
    pr = payload["pull_request"]
    pr.update(
        number=number,
        title=title,
        body=body,
        updated_at=at,
        merged=merged,
        html_url=f"https://github.com/{REPO}/pull/{number}",
    )
    pr["head"]["ref"] = branch
    pr["state"] = "closed" if closed else "open"
    pr["closed_at"] = at if closed else None
    pr["merged_at"] = at if closed and merged else None
    if author is not None:
        pr["user"] = author
    if sender is not None:
        payload["sender"] = sender
    return payload


def push(repo: str, *paths: str, ref: str = "refs/heads/main") -> dict[str, Any]:
    """A push as GitHub sends it (octokit's example, trimmed): the files its commit touched."""
    owner, name = repo.split("/")
    commit = {
        "id": "6113728f27ae82c7b1a177c8d03f9e96e0adf246",
        "message": "Update settings",
        "added": [],
        "modified": list(paths),
        "removed": [],
    }
    return {
        "ref": ref,
        "before": "0" * 40,
        "after": "6113728f27ae82c7b1a177c8d03f9e96e0adf246",
        "created": False,
        "deleted": False,
        "forced": False,
        "commits": [commit],
        "head_commit": commit,
        "repository": {
            "id": 186853002,
            "name": name,
            "full_name": repo,
            "owner": {"login": owner, "type": "User"},
            "default_branch": "main",
            "master_branch": "main",
        },
        "pusher": {"name": owner},
        "sender": {"login": owner, "type": "User"},
    }


def issue_comment(body: str, user: str, *, on_pr: bool = False) -> dict[str, Any]:
    """An ``issue_comment.created`` delivery: ``user`` wrote ``body`` on issue 1 of REPO, or
    on its PR 2 if ``on_pr``."""
    payload = copy.deepcopy(fixture("issue_comment.created"))
    payload["comment"]["body"] = body
    payload["comment"]["user"] = {"login": user, "type": "User"}
    payload["comment"]["html_url"] = f"https://github.com/{REPO}/issues/1#issuecomment-1"
    if on_pr:
        payload["issue"]["pull_request"] = {"url": "x"}
        payload["issue"]["number"] = 2
    return payload


def pull_request_review(
    opened: dict[str, Any], body: str, *, comment: bool = False
) -> dict[str, Any]:
    """A review (``pull_request_review.submitted``) or, with ``comment``, a review comment
    (``pull_request_review_comment.created``) on the PR of ``opened``: the fields the bot
    reads; GitHub sends far more."""
    key = "comment" if comment else "review"
    return {
        "action": "created" if comment else "submitted",
        key: {"id": 80, "body": body, "user": {"login": "reviewer"}},
        "pull_request": {"number": opened["pull_request"]["number"]},
        "repository": opened["repository"],
        "sender": {"login": "reviewer", "type": "User"},
    }


def jira_comment_created(comment_id: str, body: str, author: dict[str, Any]) -> dict[str, Any]:
    """A ``comment_created`` delivery saying ``author`` wrote comment ``comment_id``."""
    event = fixture("jira.comment_created")
    event["comment"].update(id=comment_id, body=body, author=author)
    return event


def issues_opened(**changes: Any) -> bytes:
    """The ``issues.opened`` fixture as raw bytes, its top-level fields replaced."""
    return fixture_body("issues.opened", **changes)


def jira_issue_created(**changes: Any) -> bytes:
    """The ``jira:issue_created`` fixture as raw bytes, its top-level fields replaced."""
    return fixture_body("jira.issue_created", **changes)

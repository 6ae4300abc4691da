"""Which ticket a delivery is about: told once, when it is received, and stored with it.

The worker runs one ticket's deliveries in order (its lanes), and the deliveries page shows
the ticket; both read the stored key. Plain Python on the parsed payload: migration 0009
tells the rows stored before it with this same function.

A key is parsed, not copied: a Jira key as Atlassian allows project keys (``PB-12``), a
GitHub one as ``owner/name#N`` with GitHub's name rules. Anything else (a NUL that PostgreSQL
refuses to store, a path, a 5,000-character word) is no ticket: the receiver refuses the
delivery naming the field (`problem`), and rows stored before are kept without one.
"""

from __future__ import annotations

import re
from typing import Any

# As long as the ticket keys stored everywhere else (side effects, usage, links).
MAX_TICKET_CHARS = 200
# Atlassian's project keys: an upper-case letter, then letters, digits or underscores; then the
# issue's number. Lengths are checked before the pattern, which has no nested repetition: a
# single linear pass whatever the input.
_JIRA_KEY = re.compile(r"[A-Z][A-Z0-9_]{0,63}-[1-9][0-9]{0,17}")
MAX_JIRA_KEY_CHARS = 64 + 1 + 18
# GitHub: an owner of letters, digits and hyphens (up to 39), a repository name of letters,
# digits, `.`, `_` and `-` (up to 100, not `.` or `..`). Owners older than GitHub's current
# rules may hold `_` or `.`, which bot.payloads' RepoName accepts too.
_OWNER = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,38}")
_REPO = re.compile(r"[A-Za-z0-9_.-]{1,100}")
MAX_REPO_CHARS = 39 + 1 + 100
# Issue and pull request numbers: positive, and within PostgreSQL's BIGINT.
MAX_NUMBER = 2**63 - 1


def jira_key(value: object) -> str | None:
    """``value`` when it is a Jira issue key such as ``PB-12``, else None."""
    if not isinstance(value, str) or not 0 < len(value) <= MAX_JIRA_KEY_CHARS:
        return None
    return value if _JIRA_KEY.fullmatch(value) else None


def repo_name(value: object) -> str | None:
    """``value`` when it is a GitHub ``owner/name``, else None."""
    if not isinstance(value, str) or not 0 < len(value) <= MAX_REPO_CHARS:
        return None
    owner, slash, name = value.partition("/")
    if not slash or not _OWNER.fullmatch(owner) or not _REPO.fullmatch(name):
        return None
    return None if name in (".", "..") else value


def github_key(repo: object, number: object) -> str | None:
    """``owner/name#N`` for a valid repository and a positive whole ``number``, else None."""
    name = repo_name(repo)
    # bool is an int in Python; `true` is no issue number.
    if name is None or type(number) is not int or not 0 < number <= MAX_NUMBER:
        return None
    return f"{name}#{number}"


def checked(key: str | None) -> str | None:
    """``key`` when it is a Jira or a GitHub ticket key as `ticket_key` tells them, else None:
    what the inbox stores, whoever queued the row."""
    if key is None or jira_key(key) is not None:
        return key
    repo, hash_sign, number = key.rpartition("#")
    if not hash_sign or not number.isascii() or not number.isdigit() or number[0] == "0":
        return None
    return key if github_key(repo, int(number[:19])) == key else None


def ticket_key(source: str, payload: Any) -> str | None:
    """A Jira issue key (``PB-12``) or a GitHub issue or pull request (``owner/repo#12``),
    read from a delivery's parsed payload; None when the payload names no single valid ticket."""
    if not isinstance(payload, dict):
        return None
    issue = payload.get("issue")
    if source == "jira":
        return jira_key(issue.get("key") if isinstance(issue, dict) else None)
    if source != "github":
        return None
    repo = payload.get("repository")
    name = repo.get("full_name") if isinstance(repo, dict) else None
    number = None
    for item in (issue, payload.get("pull_request"), payload):
        number = item.get("number") if isinstance(item, dict) else None
        if number is not None:
            break
    return github_key(name, number)


def problem(source: str, payload: Any) -> tuple[str, str] | None:
    """(field, what it must be) when ``payload`` names its ticket in a shape no tracker sends:
    the receiver refuses such a delivery (400), as it does any other malformed field."""
    if not isinstance(payload, dict):
        return None
    if source == "jira":
        issue = payload.get("issue")
        key = issue.get("key") if isinstance(issue, dict) else None
        if key is not None and jira_key(key) is None:
            return "issue.key", "must be a Jira issue key such as PB-12"
        return None
    repo = payload.get("repository")
    name = repo.get("full_name") if isinstance(repo, dict) else None
    if source == "github" and name is not None and repo_name(name) is None:
        return "repository.full_name", "must be a GitHub repository such as octo-org/app"
    return None

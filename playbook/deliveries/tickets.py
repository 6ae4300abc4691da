"""Which ticket a delivery is about: told once, when it is received, and stored with it.

The worker runs one ticket's deliveries in order (its lanes), and the deliveries page shows
the ticket; both read the stored key. Plain Python on the parsed payload: migration 0009
tells the rows stored before it with this same function.
"""

from __future__ import annotations

from typing import Any

# As long as the ticket keys stored everywhere else (side effects, usage, links).
MAX_TICKET_CHARS = 200


def ticket_key(source: str, payload: Any) -> str | None:
    """A Jira issue key (``PB-12``) or a GitHub issue or pull request (``owner/repo#12``),
    read from a delivery's parsed payload; None when the payload names no single ticket."""
    if not isinstance(payload, dict):
        return None
    issue = payload.get("issue")
    if source == "jira":
        key = issue.get("key") if isinstance(issue, dict) else None
        return key if isinstance(key, str) and 0 < len(key) <= MAX_TICKET_CHARS else None
    if source != "github":
        return None
    repo = payload.get("repository")
    name = repo.get("full_name") if isinstance(repo, dict) else None
    number = None
    for item in (issue, payload.get("pull_request"), payload):
        number = item.get("number") if isinstance(item, dict) else None
        if number is not None:
            break
    # bool is an int in Python; `true` is no issue number.
    if not isinstance(name, str) or not name or type(number) is not int:
        return None
    key = f"{name}#{number}"
    return key if len(key) <= MAX_TICKET_CHARS else None

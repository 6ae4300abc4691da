"""An issue comment's reactions through GitHub's REST API: conditional, paginated and bounded.

PyGithub lists reactions but cannot send ``If-None-Match`` or hand back the ETag, so the
list is read through the client's public requester. An unchanged list answers 304, which
GitHub does not count against the rate limit.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from urllib.parse import quote

from github.GithubException import GithubException

from playbook.fit.reactions import Reaction
from playbook.reviews.proposals import is_bot

PER_PAGE = 100  # GitHub's most per page
# A comment with more reactions than this is read this far (a hostile swarm costs 10 calls).
MAX_PAGES = 10
# GitHub logins are at most 39 characters, an App's `name[bot]` a few more.
LOGIN_CHARS = 100
ETAG_CHARS = 200  # what `bot_comments.reactions_etag` holds
_NEXT = re.compile(r'<([^<>\s]+)>\s*;\s*rel="?next"?')


@dataclass(frozen=True)
class ReactionsRead:
    """What GitHub answered: ``read`` (with the reactions), ``unchanged`` (304) or ``gone`` (404).

    ``etag`` is what to send next time; None when the answer spans several pages (the first
    page's ETag does not cover the others) or is too long to keep.
    """

    status: str
    reactions: list[Reaction] = field(default_factory=list)
    etag: str | None = None


def read_reactions(client: Any, repo: str, comment_id: int, etag: str | None) -> ReactionsRead:
    """The reactions on issue comment ``comment_id`` of ``repo``, asked with ``etag``.

    Any other failure raises PyGithub's exception for it (a rate limit included), as its own
    calls do.
    """
    requester = client.requester
    url = f"/repos/{quote(repo, safe='/')}/issues/comments/{int(comment_id)}/reactions"
    headers = {"If-None-Match": etag} if etag else None
    status, answered, body = requester.requestJson(
        "GET", url, parameters={"per_page": PER_PAGE}, headers=headers
    )
    if status == 304:
        return ReactionsRead("unchanged", etag=etag)
    if status == 404:
        return ReactionsRead("gone")
    items = _page(requester, status, answered, body)
    first_etag = answered.get("etag")
    pages, next_url = 1, _next(answered.get("link"))
    while next_url is not None and pages < MAX_PAGES:
        status, answered, body = requester.requestJson("GET", next_url)
        if status == 404:
            return ReactionsRead("gone")
        items.extend(_page(requester, status, answered, body))
        pages, next_url = pages + 1, _next(answered.get("link"))
    # A full first page may grow a second without changing: only a short single page's
    # ETag tells that nothing changed anywhere.
    whole = pages == 1 and len(items) < PER_PAGE
    keep = first_etag if whole and isinstance(first_etag, str) else None
    reactions = [r for r in (_reaction(item) for item in items) if r is not None]
    return ReactionsRead("read", reactions, keep if keep and len(keep) <= ETAG_CHARS else None)


def _page(requester: Any, status: int, headers: dict[str, Any], body: str) -> list[Any]:
    """One page's items; a failure as PyGithub raises it, an answer that is no list as a 502."""
    try:
        data = json.loads(body) if body else None
    except ValueError:
        data = None
    if status >= 300:
        raise requester.createException(status, headers, data if isinstance(data, dict) else {})
    if not isinstance(data, list):
        raise GithubException(502, {"message": "the reactions answer is not a list"}, headers)
    return data


def _next(link: Any) -> str | None:
    """The Link header's next page, if any."""
    if not isinstance(link, str):
        return None
    found = _NEXT.search(link)
    return found.group(1) if found else None


def _reaction(item: Any) -> Reaction | None:
    """One listed reaction, or None for anything not in GitHub's shape (a deleted account)."""
    if not isinstance(item, dict):
        return None
    user, content = item.get("user"), item.get("content")
    if not isinstance(user, dict) or not isinstance(content, str):
        return None
    login, kind = user.get("login"), user.get("type")
    if not isinstance(login, str) or not login.strip() or len(login) > LOGIN_CHARS:
        return None
    kind = kind if isinstance(kind, str) else None
    number = item.get("id")
    return Reaction(
        login=login,
        is_bot=is_bot(login, kind),
        content=content[:32],
        at=_time(item.get("created_at")),
        id=number if isinstance(number, int) and not isinstance(number, bool) else 0,
    )


def _time(value: Any) -> datetime | None:
    if not isinstance(value, str) or len(value) > 40:
        return None
    try:
        at = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return at if at.tzinfo is not None else None

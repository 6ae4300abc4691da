"""The web page's scope filter means what a search's scope means on every door."""

from __future__ import annotations

import re
from typing import Any

from sqlalchemy import Engine

from playbook.db import transaction
from playbook.lessons import lifecycle

TEXTS = {
    "global": "Retry webhooks with an idempotency key",
    "CTMS": "CTMS webhook retries need the idempotency header",
    "acme/api": "acme/api webhook retries keep the idempotency key in Redis",
}


def _scopes(page: str) -> list[str]:
    """The scope line of each lesson row, in order."""
    return re.findall(r'<div class="meta">([^<·]+?) ·', page)


def _searched(page: str) -> str:
    found = re.search(r'<p class="muted searched">([^<]+)</p>', page)
    assert found, "the page does not say what it searched"
    return found.group(1).replace("&#39;", "'")


def test_a_scope_chosen_shows_it_and_global_and_the_page_says_so(
    shared_app: Any, engine: Engine
) -> None:
    with transaction(engine) as session:
        for scope, text in TEXTS.items():
            lifecycle.add(session, text, learned_from="T-1", actor="t", scope=scope)
    client = shared_app(ui_public_read=True).test_client()

    searched = client.get("/ui/?q=webhook+retries&scope=CTMS").text
    assert sorted(_scopes(searched)) == ["CTMS", "global"]
    assert _searched(searched) == "Searched: CTMS and global (the scope named and global)"
    assert "ranked as the bot ranks them for a ticket" in searched

    # The same filter without a search lists the same lessons.
    listed = client.get("/ui/?scope=CTMS").text
    assert sorted(_scopes(listed)) == ["CTMS", "global"]
    assert _searched(listed) == "Showing: CTMS and global (the scope named and global)"

    everything = client.get("/ui/?q=webhook+retries").text
    assert sorted(_scopes(everything)) == ["CTMS", "acme/api", "global"]
    assert "every scope" in _searched(everything)

    only_global = client.get("/ui/?q=webhook+retries&scope=global").text
    assert _scopes(only_global) == ["global"]
    # The filter's choices say what each means.
    assert '<option value="CTMS" selected>CTMS and global</option>' in searched

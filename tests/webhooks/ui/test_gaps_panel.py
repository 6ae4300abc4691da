"""The gaps panel of /ui/stats: groups of tickets without a lesson, linked, titles as text."""

from __future__ import annotations

import html
import re
from typing import Any

import pytest
from sqlalchemy import Engine

from tests.gaps_world import CLUSTER, OTHERS, searched

HOSTILE = '<script>alert(1)</script><img src=x onerror="alert(2)"> \u202eKafka'


@pytest.fixture
def page(shared_app: Any) -> Any:
    """The page, readable without a login, with Jira's address set (one app for the module:
    its tests only send requests)."""
    changes = {"ui_public_read": True, "jira_url": "https://jira.example.com"}
    return shared_app(**changes).test_client()


def panel(client: Any) -> str:
    answer = client.get("/ui/stats")
    assert answer.status_code == 200, answer.text
    found = re.search(r'<section class="card gaps".*?</section>', answer.text, re.S)
    assert found, "no gaps panel on /ui/stats"
    return found.group(0)


def text(markup: str) -> str:
    """What a reader sees: tags dropped, spaces collapsed, none before punctuation."""
    said = " ".join(html.unescape(re.sub(r"<[^>]+>", " ", markup)).split())
    return re.sub(r" ([,:.)])", r"\1", said)


def test_a_gap_shows_its_linked_tickets_and_words(engine: Engine, page: Any) -> None:
    searched(engine, OTHERS + CLUSTER)
    markup = panel(page)
    said = text(markup)
    assert "Groups of at least 3 similar tickets from the last 7 days that got no lesson" in said
    assert "4 tickets, 2026-11-20 22:00 UTC to 2026-11-21 01:00 UTC (4 a week)" in said
    assert "(4 a week): consumer, commit, rebalance, group, offset, kafka CTMS-101" in said
    assert '<a href="https://jira.example.com/browse/CTMS-101" rel="noopener noreferrer">' in markup
    assert CLUSTER[0][1] in said
    assert "CTMS-201" not in said  # not part of any gap


def test_hostile_titles_are_shown_as_text(engine: Engine, page: Any) -> None:
    cluster = [(key, f"{title} {HOSTILE}", body) for key, title, body in CLUSTER]
    searched(engine, OTHERS + cluster)
    answer = page.get("/ui/stats").text
    assert "<script>alert" not in answer
    assert "<img src=x" not in answer
    assert "\u202e" not in answer  # a direction override would reorder the page around it
    markup = panel(page)
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in markup
    assert "onerror=&#34;alert(2)&#34;" in markup or "onerror=&quot;alert(2)&quot;" in markup


def test_no_gap_says_so(page: Any) -> None:
    said = text(panel(page))
    assert "No gap: no 3 similar tickets without a lesson in the last 7 days." in said

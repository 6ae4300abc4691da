"""The "Possibly stale" panel of /ui/stats: flagged lessons, what changed, the week's digest."""

from __future__ import annotations

import html
import re
from typing import Any

import pytest
from sqlalchemy import Engine

from playbook.anchors.stale import FileChange, clear, flag
from playbook.db import transaction
from playbook.lessons import demotions, lifecycle

HOSTILE = "<script>alert(1)</script> \u202eKafka lock"


@pytest.fixture
def page(shared_app: Any) -> Any:
    return shared_app(ui_public_read=True).test_client()


def panel(client: Any) -> str:
    answer = client.get("/ui/stats")
    assert answer.status_code == 200, answer.text
    found = re.search(r'<section class="card stale".*?</section>', answer.text, re.S)
    assert found, "no stale panel on /ui/stats"
    return found.group(0)


def said(markup: str) -> str:
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", markup)).split())


def test_flagged_lessons_are_listed_with_what_changed(engine: Engine, page: Any) -> None:
    assert "No lesson is flagged." in said(panel(page))
    with transaction(engine) as session:
        gone = lifecycle.add(session, HOSTILE, learned_from="T-1", actor="t", scope="acme/api")
        gone.bullet.paths = ["orders/locking.py"]
        kept = lifecycle.add(session, "Retry once", learned_from="T-2", actor="t", scope="acme/api")
        kept.bullet.paths = ["pay/**"]
        rejected = lifecycle.add(
            session, "Pay in cents", learned_from="T-3", actor="t", scope="acme/api"
        )
        rejected.bullet.paths = ["pay/**"]
        session.flush()
        changes = [FileChange("removed", "orders/locking.py"), FileChange("modified", "pay/a.py")]
        flag(session, "acme/api", "acme/api#12", changes, actor="bot")
        clear(session, kept.bullet.id, actor="maintainer")
        # Its PR closed unmerged: the bot deprecates it, which is no maintainer's look.
        lifecycle.deprecate(
            session, rejected.bullet.id, reason=demotions.UNMERGED, actor="playbook-bot"
        )
    markup = panel(page)
    text = said(markup)
    assert (
        "Last 7 days: 3 flagged, 1 cleared, 0 edited, 0 superseded, 0 deprecated, "
        "1 deprecated by the bot, 1 still open"
    ) in text
    assert f'href="/ui/lessons/{gone.bullet.id}"' in markup
    assert "acme/api#12 removed every file it is about (deleted orders/locking.py)" in text
    assert "left out of AGENTS.md until looked at" in text
    assert kept.bullet.id not in text
    assert "<script>" not in markup and "&lt;script&gt;" in markup

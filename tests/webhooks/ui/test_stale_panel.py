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
TOKEN = "ui-maintainer-token"


def _log_in(client: Any) -> None:
    login = client.get("/ui/login").text
    token = re.search(r'name="csrf_token" value="([^"]+)"', login).group(1)
    answer = client.post("/ui/login", data={"token": TOKEN, "name": "carol", "csrf_token": token})
    assert answer.status_code == 302, answer.text


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


def test_the_lesson_page_the_panel_links_to_shows_the_flag_and_clears_it(
    engine: Engine, shared_app: Any
) -> None:
    with transaction(engine) as session:
        gone = lifecycle.add(session, HOSTILE, learned_from="T-1", actor="t", scope="acme/api")
        gone.bullet.paths = ["orders/locking.py"]
        session.flush()
        removed = [FileChange("removed", "orders/locking.py")]
        flag(session, "acme/api", "acme/api#12", removed, actor="bot")
        lesson_id = gone.bullet.id
    client = shared_app(api_token=TOKEN).test_client()
    _log_in(client)
    page = client.get(f"/ui/lessons/{lesson_id}").text
    note = said(page.split('class="demoted card stale-flag"')[1].split("</div>")[0])
    assert "Possibly stale since" in note
    assert "acme/api#12 removed every file it is about (deleted orders/locking.py)" in note
    assert "left out of AGENTS.md until looked at" in note
    token = re.search(r'name="csrf_token" value="([^"]+)"', page).group(1)
    # Someone who is not logged in sees the flag, and no form to clear it.
    public = shared_app(api_token=TOKEN, ui_public_read=True).test_client()
    seen = public.get(f"/ui/lessons/{lesson_id}").text
    assert "Possibly stale since" in seen and "clear-stale" not in seen

    # Without the CSRF token nothing changes; with it, the flag is cleared with the reason.
    refused = client.post(f"/ui/lessons/{lesson_id}/clear-stale", data={"reason": "x"})
    assert refused.status_code in (400, 403)
    answer = client.post(
        f"/ui/lessons/{lesson_id}/clear-stale",
        data={"csrf_token": token, "reason": "the lock moved to orders/db.py"},
        follow_redirects=True,
    )
    assert f"cleared the stale flag of {lesson_id}" in answer.text
    assert "stale-flag" not in answer.text
    assert "the lock moved to orders/db.py" in answer.text  # in its history
    again = client.post(
        f"/ui/lessons/{lesson_id}/clear-stale", data={"csrf_token": token}, follow_redirects=True
    )
    assert f"{lesson_id} was already like that; nothing changed" in again.text

"""/ui/proposals' Consolidations: read the group, edit the merged text, accept, reject, undo."""

from __future__ import annotations

import html
import re
from typing import Any

import pytest
from sqlalchemy import Engine

from playbook.db import transaction
from playbook.models import Bullet
from tests.webhooks.consolidating import open_consolidation
from webhooks import create_app

TOKEN = "ui-maintainer-token"
HOSTILE = 'Close the <script>alert("x")</script> consumer before the broker fails over'
TEXTS = (
    "Reconnect the consumer after a broker failover, and close it before the broker fails over",
    HOSTILE,
)


@pytest.fixture
def client(shared_app: Any) -> Any:
    """A client of the module's app (its tests only send requests)."""
    return shared_app(api_token=TOKEN).test_client()


@pytest.fixture
def proposal(engine: Engine) -> tuple[int, list[str]]:
    return open_consolidation(engine, TEXTS, dropped={0: ["failover"]})


def _token(client: Any, path: str) -> str:
    found = re.search(r'name="csrf_token" value="([^"]+)"', client.get(path).text)
    assert found, f"no CSRF token on {path}"
    return found.group(1)


def _log_in(client: Any) -> None:
    data = {"token": TOKEN, "name": "carol", "csrf_token": _token(client, "/ui/login")}
    assert client.post("/ui/login", data=data).status_code == 302


def _lesson(engine: Engine, bullet_id: str) -> tuple[str, str, str | None]:
    with transaction(engine) as session:
        bullet = session.get(Bullet, bullet_id)
        assert bullet is not None
        return bullet.status, bullet.text, bullet.superseded_by


def _section(page: str) -> str:
    return page.split('id="consolidations"', 1)[1].split("</section>", 1)[0]


def test_the_section_shows_the_group_and_escapes_its_text(
    client: Any, proposal: tuple[int, list[str]]
) -> None:
    number, members = proposal
    _log_in(client)
    page = client.get("/ui/proposals")
    assert page.status_code == 200
    section = _section(page.text)
    assert "Consolidations" in page.text and f"consolidation {number}" in section
    for member in members:
        assert f'href="/ui/lessons/{member}">{member}</a>' in section
    assert "<script>" not in page.text and "&lt;script&gt;" in section
    assert re.search(r"saves [\d,]+ characters", section)
    assert "longest member — edit before accepting" in section
    # The draft sits in an editable box; the dropped term is marked in the member's text.
    box = re.search(r'<textarea id="merged-\d+" name="text"[^>]*>(.*?)</textarea>', section, re.S)
    assert box and html.unescape(box.group(1)) in TEXTS
    assert '<mark class="dropped">failover</mark>' in section
    assert (
        f"Accept consolidation {number}" in section and f"Reject consolidation {number}" in section
    )


def test_without_a_login_the_group_shows_and_nothing_can_be_decided(
    engine: Engine, settings: Any, proposal: tuple[int, list[str]]
) -> None:
    number, members = proposal
    public = settings.model_copy(update={"api_token": TOKEN, "ui_public_read": True})
    client = create_app(public, engine=engine).test_client()
    section = _section(client.get("/ui/proposals").text)
    assert members[0] in section and "Log in</a> to accept or reject" in section
    assert "<textarea" not in section and "Accept consolidation" not in section
    answer = client.post(f"/ui/consolidations/{number}/accept", data={"text": "x"})
    assert answer.status_code == 400  # no CSRF token
    token = _token(client, "/ui/login")
    answer = client.post(
        f"/ui/consolidations/{number}/accept", data={"text": "merged", "csrf_token": token}
    )
    assert answer.status_code == 302 and "/ui/login" in answer.headers["Location"]
    assert [_lesson(engine, m)[0] for m in members] == ["active", "active"]


def test_accept_with_the_edited_text_then_undo_from_the_page(
    client: Any, proposal: tuple[int, list[str]], engine: Engine
) -> None:
    number, members = proposal
    _log_in(client)
    token = _token(client, "/ui/proposals")
    merged_text = "Close the consumer before a broker failover and reconnect it after"
    answer = client.post(
        f"/ui/consolidations/{number}/accept", data={"text": merged_text, "csrf_token": token}
    )
    assert answer.status_code == 302
    page = client.get("/ui/proposals").text
    found = re.search(rf"accepted consolidation {number}: merged lesson ([\w-]+)", page)
    assert found, page
    merged = found.group(1)
    assert _lesson(engine, merged) == ("active", merged_text, None)
    assert [_lesson(engine, m)[:3:2] for m in members] == [("superseded", merged)] * 2
    assert revisions_by(engine, merged) == "ui:carol"
    section = _section(page)
    assert f"Accept consolidation {number}" not in section
    assert f'<a class="merged" href="/ui/lessons/{merged}">{merged}</a>' in section
    assert f"Undo consolidation {number}" in section

    answer = client.post(
        f"/ui/consolidations/{number}/undo", data={"reason": "too broad", "csrf_token": token}
    )
    assert answer.status_code == 302
    page = client.get("/ui/proposals").text
    assert f"undid consolidation {number}" in page
    assert [_lesson(engine, m)[0] for m in members] == ["active", "active"]
    assert _lesson(engine, merged)[0] == "archived"
    assert f"Undo consolidation {number}" not in _section(page)


def revisions_by(engine: Engine, bullet_id: str) -> str:
    """Who the merged lesson's first revision names."""
    from playbook.models import Revision

    with transaction(engine) as session:
        first = session.query(Revision).filter_by(bullet_id=bullet_id).order_by(Revision.id).first()
        assert first is not None
        return first.actor


def test_reject_from_the_page_keeps_the_lessons(
    client: Any, proposal: tuple[int, list[str]], engine: Engine
) -> None:
    number, members = proposal
    _log_in(client)
    token = _token(client, "/ui/proposals")
    answer = client.post(
        f"/ui/consolidations/{number}/reject", data={"reason": "different", "csrf_token": token}
    )
    assert answer.status_code == 302
    page = client.get("/ui/proposals").text
    assert f"rejected consolidation {number}" in page
    assert f"Accept consolidation {number}" not in _section(page)
    assert [_lesson(engine, m)[0] for m in members] == ["active", "active"]
    # A second decision on the closed proposal says why it cannot be made.
    client.post(f"/ui/consolidations/{number}/accept", data={"text": "x", "csrf_token": token})
    assert "rejected" in client.get("/ui/proposals").text


def test_a_refused_text_keeps_the_edit_in_the_box_and_changes_nothing(
    client: Any, proposal: tuple[int, list[str]], engine: Engine
) -> None:
    number, members = proposal
    _log_in(client)
    token = _token(client, "/ui/proposals")
    secret = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
    edited = f"Reconnect after failover <b>now</b> with {secret}"
    answer = client.post(
        f"/ui/consolidations/{number}/accept", data={"text": edited, "csrf_token": token}
    )
    assert answer.status_code == 400
    assert "not accepted: text:" in answer.text and "GitHub" in answer.text
    # The maintainer's words are back in the box (escaped), to take the credential out.
    assert "Reconnect after failover &lt;b&gt;now&lt;/b&gt;" in _section(answer.text)
    assert [_lesson(engine, m)[0] for m in members] == ["active", "active"]
    empty = client.post(
        f"/ui/consolidations/{number}/accept", data={"text": "  ", "csrf_token": token}
    )
    assert empty.status_code == 400 and "text: is empty" in empty.text
    assert (
        client.post(
            "/ui/consolidations/987654/accept", data={"text": "x", "csrf_token": token}
        ).status_code
        == 302
    )
    assert (
        "not accepted: no consolidation with id &#39;987654&#39;"
        in client.get("/ui/proposals").text
    )
    assert (
        client.post("/ui/consolidations/abc/reject", data={"csrf_token": token}).status_code == 404
    )


def test_a_models_draft_names_the_model_and_the_terms_it_dropped(
    client: Any, proposal: tuple[int, list[str]], engine: Engine
) -> None:
    number, members = proposal
    from playbook.consolidation import store

    with transaction(engine) as session:
        store.set_draft(
            session,
            number,
            "Reconnect the consumer after the broker changes",
            source="model",
            model="<b>merge-mini</b>",
        )
    _log_in(client)
    section = _section(client.get("/ui/proposals").text)
    assert "merged text written by &lt;b&gt;merge-mini&lt;/b&gt;" in section
    assert "longest member" not in section
    # The model's draft left out what the first member says about failover: it is marked.
    first = section.split(f'href="/ui/lessons/{members[0]}"', 1)[1].split("</li>", 1)[0]
    assert '<mark class="dropped">failover</mark>' in first
    assert "missing from the merged text:" in first

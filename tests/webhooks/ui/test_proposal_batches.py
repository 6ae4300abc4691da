"""/ui/proposals in batches: a PR's review proposals under one heading, acted on together."""

from __future__ import annotations

import re
from typing import Any

import pytest
from sqlalchemy import Engine

from playbook.db import transaction
from playbook.lessons import lifecycle
from playbook.models import Bullet
from webhooks import create_app

TOKEN = "ui-maintainer-token"
PR = "https://github.com/octo-org/widgets/pull/7"
HOSTILE = 'Never trust <script>alert("x")</script> input'


@pytest.fixture
def client(shared_app: Any) -> Any:
    """A client of the module's app (its tests only send requests)."""
    return shared_app(api_token=TOKEN).test_client()


def _propose(engine: Engine, text: str, url: str | None, source: str = "review") -> str:
    with transaction(engine) as session:
        return lifecycle.add(
            session,
            text,
            learned_from="CTMS-9",
            actor="t",
            status="proposed",
            source=source,
            source_url=url,
        ).bullet.id


def _token(client: Any, path: str) -> str:
    found = re.search(r'name="csrf_token" value="([^"]+)"', client.get(path).text)
    assert found, f"no CSRF token on {path}"
    return found.group(1)


def _log_in(client: Any) -> None:
    data = {"token": TOKEN, "name": "carol", "csrf_token": _token(client, "/ui/login")}
    assert client.post("/ui/login", data=data).status_code == 302


def _status(engine: Engine, *ids: str) -> list[str]:
    with transaction(engine) as session:
        return [session.get(Bullet, bullet_id).status for bullet_id in ids]  # type: ignore[union-attr]


@pytest.fixture
def world(engine: Engine) -> dict[str, str]:
    return {
        "one": _propose(engine, "Always pin the base image digest", f"{PR}#discussion_r1"),
        "two": _propose(engine, HOSTILE, f"{PR}#issuecomment-2"),
        "odd": _propose(engine, "Prefer UTC in logs", "javascript:alert(1)//github.com/o/r/pull/9"),
        "agent": _propose(engine, "Avoid sleeping in tests", None, source="mcp"),
    }


def test_the_page_groups_a_prs_proposals_under_a_link_to_it_and_escapes_them(
    client: Any, world: dict[str, str]
) -> None:
    _log_in(client)
    page = client.get("/ui/proposals").text
    assert f'Review of <a href="{PR}"' in page and ">octo-org/widgets#7</a>" in page
    batch = page.split("Review of", 1)[1].split("</section>", 1)[0]
    assert world["one"] in batch and world["two"] in batch and world["agent"] not in batch
    assert batch.count("from review feedback") == 2
    assert f'href="{PR}#discussion_r1"' in batch and f'href="{PR}#issuecomment-2"' in batch
    # Hostile review text is text, and a javascript: source never becomes a link.
    assert "<script>" not in page and "&lt;script&gt;" in page
    assert 'href="javascript' not in page
    assert "Approve all of octo-org/widgets#7" in batch
    assert "Reject all of octo-org/widgets#7" in batch
    for bullet_id in world.values():
        assert f"Approve {bullet_id}<" in page and f"Reject {bullet_id}<" in page
        assert f"/ui/lessons/{bullet_id}/edit" in page
    # Only a PR's review proposals form a batch with batch buttons.
    assert page.count("Approve all of") == 1


def test_approve_all_approves_what_was_shown_and_leaves_the_rest(
    client: Any, engine: Engine, world: dict[str, str]
) -> None:
    _log_in(client)
    token = _token(client, "/ui/proposals")
    late = _propose(engine, "Make sure migrations are reversible", f"{PR}#discussion_r3")
    form = {"csrf_token": token, "key": "octo-org/widgets#7", "id": [world["one"], world["two"]]}
    answer = client.post("/ui/proposals/approve", data=form, follow_redirects=True)
    assert answer.status_code == 200
    assert f"approved 2 proposals of octo-org/widgets#7: {world['one']}, {world['two']}" in (
        answer.text
    )
    assert _status(engine, world["one"], world["two"]) == ["active", "active"]
    # Arrived after the page was drawn, or in no batch: still waiting.
    assert _status(engine, late, world["agent"], world["odd"]) == ["proposed"] * 3


def test_reject_all_needs_a_reason_and_deprecates_the_batch_with_it(
    client: Any, engine: Engine, world: dict[str, str]
) -> None:
    _log_in(client)
    token = _token(client, "/ui/proposals")
    form = {"csrf_token": token, "key": "octo-org/widgets#7", "id": [world["one"], world["two"]]}
    answer = client.post("/ui/proposals/reject", data=form, follow_redirects=True)
    assert "say why" in answer.text
    assert _status(engine, world["one"], world["two"]) == ["proposed", "proposed"]
    answer = client.post(
        "/ui/proposals/reject", data={**form, "reason": "style nits"}, follow_redirects=True
    )
    assert "rejected 2 proposals of octo-org/widgets#7" in answer.text
    with transaction(engine) as session:
        for bullet_id in (world["one"], world["two"]):
            bullet = session.get(Bullet, bullet_id)
            assert bullet is not None and bullet.status == "deprecated"
            assert bullet.demoted_reason == "style nits"
    # A batch no longer waiting, or a key that is no batch, is a clear message, not a crash.
    again = client.post("/ui/proposals/approve", data=form, follow_redirects=True)
    assert again.status_code == 200 and "no proposals wait in batch" in again.text
    odd = {**form, "key": "<b>" + "x" * 5_000}
    answer = client.post("/ui/proposals/approve", data=odd, follow_redirects=True)
    assert "<b>xxx" not in answer.text and "no proposals wait in batch" in answer.text


def test_batch_changes_need_a_login_and_the_csrf_token(
    client: Any, engine: Engine, settings: Any, world: dict[str, str]
) -> None:
    public = create_app(
        settings.model_copy(update={"api_token": TOKEN, "ui_public_read": True}), engine=engine
    ).test_client()
    page = public.get("/ui/proposals").text
    assert "octo-org/widgets#7" in page and "Approve all of" not in page
    form = {"csrf_token": _token(public, "/ui/login"), "key": "octo-org/widgets#7"}
    answer = public.post("/ui/proposals/approve", data={**form, "id": [world["one"]]})
    assert answer.status_code == 302 and "/ui/login" in answer.headers["Location"]
    _log_in(client)
    forged = {**form, "id": [world["one"]], "csrf_token": "forged"}
    assert client.post("/ui/proposals/approve", data=forged).status_code == 400
    assert client.post("/ui/proposals/reject", data={**forged, "reason": "x"}).status_code == 400
    assert _status(engine, world["one"]) == ["proposed"]

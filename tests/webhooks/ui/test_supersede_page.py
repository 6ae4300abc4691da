"""The lesson page's Supersede form: CSRF and a login, the pointers both ways, restore."""

from __future__ import annotations

import html
import re
from typing import Any

import pytest
from sqlalchemy import Engine

from playbook.db import transaction
from playbook.lessons import lifecycle
from playbook.models import Bullet
from webhooks import create_app

TOKEN = "ui-maintainer-token"


@pytest.fixture
def client(shared_app: Any) -> Any:
    """A client of the module's app (its tests only send requests)."""
    return shared_app(api_token=TOKEN).test_client()


@pytest.fixture
def pair(engine: Engine) -> tuple[str, str]:
    with transaction(engine) as session:
        old = lifecycle.add(session, "Pin the v1 client", learned_from="PAY-1", actor="t")
        new = lifecycle.add(session, "Use the v2 client", learned_from="PAY-2", actor="t")
    return old.bullet.id, new.bullet.id


def _token(client: Any, path: str) -> str:
    found = re.search(r'name="csrf_token" value="([^"]+)"', client.get(path).text)
    assert found, f"no CSRF token on {path}"
    return found.group(1)


def _log_in(client: Any) -> None:
    data = {"token": TOKEN, "name": "carol", "csrf_token": _token(client, "/ui/login")}
    assert client.post("/ui/login", data=data).status_code == 302


def _status(engine: Engine, bullet_id: str) -> tuple[str, str | None]:
    with transaction(engine) as session:
        bullet = session.get(Bullet, bullet_id)
        assert bullet is not None
        return bullet.status, bullet.superseded_by


def test_a_maintainer_supersedes_from_the_page_and_restores(
    client: Any, pair: tuple[str, str], engine: Engine
) -> None:
    old, new = pair
    url = f"/ui/lessons/{old}/supersede"
    assert client.post(url, data={"by": new}).status_code == 400  # no CSRF token
    _log_in(client)
    page = client.get(f"/ui/lessons/{old}").text
    assert f'action="{url}"' in page and 'name="by"' in page
    token = _token(client, f"/ui/lessons/{old}")
    assert client.post(url, data={"by": new}).status_code == 400  # still none
    assert _status(engine, old) == ("active", None)

    # A replacement that is not there, or the lesson itself: said on the page, nothing done.
    answer = client.post(url, data={"by": "pb-99", "csrf_token": token}, follow_redirects=True)
    assert "no bullet with id" in html.unescape(answer.text)
    answer = client.post(url, data={"by": old, "csrf_token": token}, follow_redirects=True)
    assert "cannot supersede itself" in answer.text
    assert _status(engine, old) == ("active", None)

    answer = client.post(
        url, data={"by": new, "reason": "v2 fixes it", "csrf_token": token}, follow_redirects=True
    )
    assert answer.status_code == 200 and f"superseded {old} by {new}" in answer.text
    assert _status(engine, old) == ("superseded", new)
    with transaction(engine) as session:
        assert lifecycle.history(session, old)[-1].actor == "ui:carol"
    old_page = client.get(f"/ui/lessons/{old}").text
    assert "Superseded by" in old_page and f'href="/ui/lessons/{new}"' in old_page
    assert "v2 fixes it" in old_page and "Restore" in old_page
    assert 'name="by"' not in old_page  # no second supersession while superseded
    new_page = client.get(f"/ui/lessons/{new}").text
    assert "Supersedes" in new_page and f'href="/ui/lessons/{old}"' in new_page
    # Out of the index, found by its words when asked for by status.
    assert f'href="/ui/lessons/{old}"' not in client.get("/ui/?q=client").text
    listed = client.get("/ui/?q=client&status=superseded").text
    assert f'href="/ui/lessons/{old}"' in listed and "matched by their words" in listed

    client.post(f"/ui/lessons/{old}/restore", data={"csrf_token": token})
    assert _status(engine, old) == ("active", None)


def test_logged_out_visitors_cannot_supersede(
    engine: Engine, settings: Any, pair: tuple[str, str]
) -> None:
    old, new = pair
    public = create_app(
        settings.model_copy(update={"api_token": TOKEN, "ui_public_read": True}), engine=engine
    ).test_client()
    assert 'name="by"' not in public.get(f"/ui/lessons/{old}").text
    token = _token(public, "/ui/login")
    answer = public.post(f"/ui/lessons/{old}/supersede", data={"by": new, "csrf_token": token})
    assert answer.status_code == 302 and "/ui/login" in answer.headers["Location"]
    assert _status(engine, old) == ("active", None)

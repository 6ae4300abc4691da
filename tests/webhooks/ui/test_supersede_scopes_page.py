"""The web page's doors keep supersession within a scope: the Supersede form and the edit form."""

from __future__ import annotations

import html
from typing import Any

import pytest
from sqlalchemy import Engine

from playbook.db import transaction
from playbook.lessons import lifecycle
from playbook.models import Bullet
from tests.webhooks.ui.test_supersede_page import TOKEN, _log_in, _token


@pytest.fixture
def client(shared_app: Any) -> Any:
    """A client of the module's app (its tests only send requests)."""
    return shared_app(api_token=TOKEN).test_client()


@pytest.fixture
def lessons(engine: Engine) -> dict[str, str]:
    with transaction(engine) as session:
        made = {
            "ours": ("Pin the v1 client", "acme/api"),
            "ours2": ("Retry the ledger export twice", "acme/api"),
            "theirs": ("Rotate the payroll password", "victim/secret"),
        }
        return {
            name: lifecycle.add(session, text, learned_from="P-1", actor="t", scope=scope).bullet.id
            for name, (text, scope) in made.items()
        }


def _row(engine: Engine, bullet_id: str) -> tuple[str, str, str | None]:
    with transaction(engine) as session:
        bullet = session.get(Bullet, bullet_id)
        assert bullet is not None
        return bullet.scope, bullet.status, bullet.superseded_by


def test_the_form_refuses_a_replacement_of_another_scope(
    client: Any, engine: Engine, lessons: dict[str, str]
) -> None:
    _log_in(client)
    old, other = lessons["ours"], lessons["theirs"]
    url = f"/ui/lessons/{old}/supersede"
    token = _token(client, f"/ui/lessons/{old}")
    answer = client.post(url, data={"by": other, "csrf_token": token}, follow_redirects=True)
    assert answer.status_code == 200
    assert "own scope or a global one" in html.unescape(answer.text)
    assert _row(engine, old) == ("acme/api", "active", None)


def test_the_edit_form_does_not_move_a_linked_lesson(
    client: Any, engine: Engine, lessons: dict[str, str]
) -> None:
    with transaction(engine) as session:
        lifecycle.supersede(session, lessons["ours"], lessons["ours2"], actor="t")
    _log_in(client)
    moved = lessons["ours2"]
    token = _token(client, f"/ui/lessons/{moved}/edit")
    form = {
        "text": "Retry the ledger export twice",
        "scope": "victim/secret",
        "learned_from": "P-1",
        "tags": "",
        "csrf_token": token,
    }
    answer = client.post(f"/ui/lessons/{moved}/edit", data=form)
    said = html.unescape(answer.text)
    assert answer.status_code == 400 and f"{moved} replaces {lessons['ours']}" in said
    assert _row(engine, moved) == ("acme/api", "active", None)

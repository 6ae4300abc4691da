"""The lesson page shows a lesson's anchors, and its edit form sets and clears them."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import Engine

from playbook.db import transaction
from playbook.lessons import lifecycle
from tests.webhooks.ui.test_supersede_page import TOKEN, _log_in, _token


@pytest.fixture
def client(shared_app: Any) -> Any:
    return shared_app(api_token=TOKEN).test_client()


@pytest.fixture
def lesson(engine: Engine) -> str:
    with transaction(engine) as session:
        return lifecycle.add(
            session,
            "Release rows in id order inside one transaction",
            learned_from="SHOP-1",
            actor="t",
            paths="orders/locking.py",
            symbols="OrderLock.acquire",
        ).bullet.id


def _anchors(engine: Engine, bullet_id: str) -> tuple[Any, Any]:
    with transaction(engine) as session:
        bullet = lifecycle.get(session, bullet_id)
        return bullet.paths, bullet.symbols


def test_the_page_shows_the_anchors_and_the_form_edits_them(
    client: Any, lesson: str, engine: Engine
) -> None:
    _log_in(client)
    page = client.get(f"/ui/lessons/{lesson}").text
    assert "Anchored to" in page
    assert "<code>orders/locking.py</code>" in page and "<code>OrderLock.acquire</code>" in page
    form = client.get(f"/ui/lessons/{lesson}/edit").text
    assert 'name="paths" value="orders/locking.py"' in form
    assert 'name="symbols" value="OrderLock.acquire"' in form

    token = _token(client, f"/ui/lessons/{lesson}/edit")
    fields = {
        "text": "Release rows in id order inside one transaction",
        "learned_from": "SHOP-1",
        "scope": "global",
        "tags": "",
        "csrf_token": token,
    }
    saved = client.post(
        f"/ui/lessons/{lesson}/edit",
        data=fields | {"paths": "orders/**, ./billing//x.py", "symbols": "OrderLock"},
    )
    assert saved.status_code == 302, saved.text
    assert _anchors(engine, lesson) == (["orders/**", "billing/x.py"], ["OrderLock"])

    refused = client.post(
        f"/ui/lessons/{lesson}/edit", data=fields | {"paths": "../etc/passwd", "symbols": ""}
    )
    assert refused.status_code == 400
    assert "paths: &#39;../etc/passwd&#39; has a &#39;..&#39; segment" in refused.text
    assert 'value="../etc/passwd"' in refused.text  # the maintainer's words kept in the box
    assert _anchors(engine, lesson) == (["orders/**", "billing/x.py"], ["OrderLock"])

    # A form from before anchors (no such fields) leaves them as they are.
    assert client.post(f"/ui/lessons/{lesson}/edit", data=fields).status_code == 302
    assert _anchors(engine, lesson) == (["orders/**", "billing/x.py"], ["OrderLock"])

    cleared = client.post(f"/ui/lessons/{lesson}/edit", data=fields | {"paths": "", "symbols": ""})
    assert cleared.status_code == 302
    assert _anchors(engine, lesson) == (None, None)
    assert "Anchored to" not in client.get(f"/ui/lessons/{lesson}").text

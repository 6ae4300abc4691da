"""/ui/stats: each scope's active lessons against its context budget."""

from __future__ import annotations

import re
from typing import Any

from sqlalchemy import Engine

from playbook.db import transaction
from playbook.lessons import lifecycle
from webhooks import create_app

TOKEN = "ui-maintainer-token"


def _log_in(client: Any) -> None:
    page = client.get("/ui/login").text
    token = re.search(r'name="csrf_token" value="([^"]+)"', page)
    assert token, "no CSRF token on the login page"
    data = {"token": TOKEN, "name": "carol", "csrf_token": token.group(1)}
    assert client.post("/ui/login", data=data).status_code == 302


def _add(engine: Engine, scope: str, text: str, ticket: str) -> None:
    with transaction(engine) as session:
        lifecycle.add(session, text, learned_from=ticket, actor="test", scope=scope)


def _row(page: str, scope: str) -> str:
    table = page.split("<h2>Context budget</h2>", 1)[1].split("</table>", 1)[0]
    found = re.search(rf"<tr[^>]*><td[^>]*><bdi>{re.escape(scope)}</bdi></td>.*?</tr>", table)
    assert found, f"no row for {scope} in the budget table"
    return found.group(0)


def test_a_scope_past_three_quarters_of_its_budget_is_marked(engine: Engine, settings: Any) -> None:
    app = create_app(
        settings.model_copy(update={"api_token": TOKEN, "context_budget": 2000}), engine=engine
    )
    client = app.test_client()
    _add(engine, "acme/big", "Pin the JDK in the build image. " + "x" * 1_600, "BIG-1")
    _add(engine, "acme/small", "Quote shell arguments in deploy scripts.", "SMALL-1")
    _log_in(client)
    page = client.get("/ui/stats").text
    big, small = _row(page, "acme/big"), _row(page, "acme/small")
    assert 'class="over"' in big and "past 75%" in big and ">2000</td>" in big
    assert 'class="over"' not in small and "past 75%" not in small

"""The web page's rules without a browser: who may see and change what, and hostile input."""

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


@pytest.fixture
def make(shared_app: Any):
    """A test client of the app with the maintainer token, and settings changed as asked (one
    app per module for each set of changes: the tests only send requests)."""

    def build(**changes: Any) -> Any:
        return shared_app(**{"api_token": TOKEN, **changes}).test_client()

    return build


@pytest.fixture
def lesson(engine: Engine) -> str:
    with transaction(engine) as session:
        return lifecycle.add(
            session, "Retry webhooks with an idempotency key", learned_from="CTMS-1", actor="t"
        ).bullet.id


def _token(client: Any, path: str = "/ui/login") -> str:
    found = re.search(r'name="csrf_token" value="([^"]+)"', client.get(path).text)
    assert found, f"no CSRF token on {path}"
    return found.group(1)


def _ids(page: str) -> list[str]:
    """The lesson ids of a lessons page, in order."""
    return re.findall(r'class="id" data-label="Id"><a href="/ui/lessons/(pb-\d+)"', page)


def _log_in(client: Any, name: str = "carol") -> None:
    answer = client.post(
        "/ui/login", data={"token": TOKEN, "name": name, "csrf_token": _token(client)}
    )
    assert answer.status_code == 302, answer.text


def test_every_page_needs_a_login_unless_public_read(make: Any, lesson: str) -> None:
    client = make()
    for path in ("/ui/", f"/ui/lessons/{lesson}", "/ui/proposals", "/ui/stats", "/ui/deliveries"):
        answer = client.get(path)
        assert answer.status_code == 302, path
        assert answer.headers["Location"].startswith("/ui/login?next=")
    public = make(ui_public_read=True)
    for path in ("/ui/", f"/ui/lessons/{lesson}", "/ui/proposals", "/ui/stats"):
        assert public.get(path).status_code == 200, path
    # Deliveries carry payloads and tracebacks: never public.
    assert public.get("/ui/deliveries").status_code == 302
    assert "Deprecate" not in public.get(f"/ui/lessons/{lesson}").text


def test_login_refuses_a_wrong_token_and_logins_are_off_without_one(make: Any) -> None:
    client = make()
    answer = client.post("/ui/login", data={"token": "guess", "csrf_token": _token(client)})
    assert answer.status_code == 401
    assert "not the maintainer token" in answer.text
    off = make(api_token=None)
    answer = off.post("/ui/login", data={"token": "anything", "csrf_token": _token(off)})
    assert answer.status_code == 503
    assert "set PLAYBOOK_API_TOKEN" in answer.text
    weird = make()
    answer = weird.post(
        "/ui/login", data={"token": TOKEN, "name": "<b>x</b>", "csrf_token": _token(weird)}
    )
    assert answer.status_code == 401 and "<b>x</b>" not in answer.text


def test_login_goes_back_only_to_this_site(make: Any) -> None:
    client = make()
    for target in ("https://evil.example/", "//evil.example/ui", "/ui\\@evil", "/api/v1/x"):
        answer = client.post(
            "/ui/login",
            data={"token": TOKEN, "next": target, "csrf_token": _token(client)},
        )
        assert answer.headers["Location"] == "/ui/", target
        client.post("/ui/logout", data={"csrf_token": _token(client, "/ui/")})
    answer = client.post(
        "/ui/login", data={"token": TOKEN, "next": "/ui/stats", "csrf_token": _token(client)}
    )
    assert answer.headers["Location"] == "/ui/stats"


def test_logging_out_takes_the_button_and_its_csrf_token(make: Any) -> None:
    client = make()
    _log_in(client)
    # A link, an image or a form on another site cannot end the session.
    assert client.get("/ui/logout").status_code == 405
    assert client.get("/ui/").status_code == 200
    cross_site = client.post("/ui/logout", headers={"Origin": "https://evil.example"})
    assert cross_site.status_code == 400
    assert client.post("/ui/logout", data={"csrf_token": "forged"}).status_code == 400
    assert client.get("/ui/").status_code == 200
    page = client.get("/ui/").text
    assert re.search(r'<form method="post" action="/ui/logout"', page)
    answer = client.post("/ui/logout", data={"csrf_token": _token(client, "/ui/")})
    assert answer.status_code == 302
    assert client.get("/ui/").status_code == 302  # back to the login


def test_a_new_token_ends_old_sessions(make: Any, lesson: str, engine: Engine, settings: Any):
    client = make()
    _log_in(client)
    assert client.get("/ui/").status_code == 200
    rotated = create_app(
        settings.model_copy(update={"api_token": "rotated-token"}), engine=engine
    ).test_client()
    rotated.set_cookie(
        "playbook_ui", client.get_cookie("playbook_ui", path="/ui").value, path="/ui"
    )
    assert rotated.get("/ui/").status_code == 302


def test_changes_need_the_csrf_token_and_a_login(make: Any, lesson: str, engine: Engine) -> None:
    client = make()
    answer = client.post(f"/ui/lessons/{lesson}/deprecate", data={"reason": "x"})
    assert answer.status_code == 400
    _log_in(client)
    answer = client.post(f"/ui/lessons/{lesson}/deprecate", data={"reason": "x"})
    assert answer.status_code == 400 and "Reload the page" in answer.text
    token = _token(client, f"/ui/lessons/{lesson}")
    answer = client.post(f"/ui/lessons/{lesson}/deprecate", data={"csrf_token": token})
    assert answer.status_code == 302  # back to the lesson, with what to fix
    with transaction(engine) as session:
        assert session.get(Bullet, lesson).status == "active"  # type: ignore[union-attr]
    answer = client.post(
        f"/ui/lessons/{lesson}/deprecate", data={"csrf_token": token, "reason": "outdated"}
    )
    with transaction(engine) as session:
        bullet = session.get(Bullet, lesson)
        assert bullet is not None and bullet.status == "deprecated"
        assert [r.actor for r in lifecycle.history(session, lesson)][-1] == "ui:carol"
    logged_out = make()
    answer = logged_out.post(
        f"/ui/lessons/{lesson}/restore", data={"csrf_token": _token(logged_out)}
    )
    assert answer.status_code == 302 and "/ui/login" in answer.headers["Location"]


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ("q=" + "x" * 201, "q"),
        ("status=gone", "status"),
        ("sort=random", "sort"),
        ("page=0", "page"),
        ("page=99999999999999999999", "page"),
        ("scope=a%00b", "scope"),
    ],
)
def test_bad_filters_are_a_400_naming_the_field(make: Any, query: str, field: str) -> None:
    client = make(ui_public_read=True)
    answer = client.get(f"/ui/?{query}")
    assert answer.status_code == 400
    assert field in answer.text


def test_unknown_pages_and_ids_are_html_404s(make: Any) -> None:
    client = make(ui_public_read=True)
    for path in ("/ui/lessons/pb-404", "/ui/lessons/%00", "/ui/nowhere"):
        answer = client.get(path)
        assert answer.status_code == 404, path
        assert answer.mimetype == "text/html"
        assert answer.headers["X-Frame-Options"] == "DENY"
    _log_in(client)
    assert client.get("/ui/deliveries/999999").status_code == 404
    # Digits past a 64-bit row id are no row id (the database would overflow on them).
    assert client.get("/ui/deliveries/" + "9" * 500).status_code == 404
    assert client.get("/ui/deliveries?status=bogus").status_code == 400


def test_text_from_outside_is_escaped_everywhere(make: Any, engine: Engine) -> None:
    with transaction(engine) as session:
        bullet = lifecycle.add(
            session,
            '<script>alert(1)</script> and "quotes"',
            learned_from="<b>X-1</b>",
            actor="t",
            tags=["<i>t</i>"],
            source_url="javascript:alert(1)",
        ).bullet.id
    client = make(ui_public_read=True)
    for path in ("/ui/", f"/ui/lessons/{bullet}", "/ui/?q=script+alert+quotes"):
        text = client.get(path).text
        assert "<script>alert" not in text and "<b>X-1</b>" not in text, path
        assert "&lt;script&gt;" in text, path
    assert "javascript:" not in client.get(f"/ui/lessons/{bullet}").text


def test_the_page_works_when_the_database_is_down(settings: Any) -> None:
    down = settings.model_copy(
        update={
            "api_token": TOKEN,
            "ui_public_read": True,
            "database_url": "postgresql+psycopg://nobody:hunter2@127.0.0.1:1/none",
        }
    )
    answer = create_app(down).test_client().get("/ui/")
    assert answer.status_code == 503
    assert "retry later" in answer.text
    assert "hunter2" not in answer.text and "127.0.0.1:1" not in answer.text


def test_search_ranks_like_the_bot_and_finds_demoted_lessons_by_words(
    make: Any, engine: Engine
) -> None:
    with transaction(engine) as session:
        ids = [
            lifecycle.add(session, text, learned_from=f"CTMS-{n}", actor="t").bullet.id
            for n, text in enumerate(
                (
                    "Retry webhooks with an idempotency key",
                    "Webhook retries need a dead letter queue for poison messages",
                    "Format SQL migrations with a linter",
                    "Old advice: retry webhooks forever",
                )
            )
        ]
        lifecycle.deprecate(session, ids[3], reason="retrying forever hides bugs", actor="t")
    client = make(ui_public_read=True)
    page = client.get("/ui/?q=webhook+retries").text
    shown = _ids(page)
    assert set(shown) == {ids[0], ids[1]}  # the deprecated one is not in the index
    assert "ranked as the bot ranks them" in page
    # Each lesson says how well it fits the words searched, as the bot's comment would.
    assert re.search(r"(strong|possible|weak) fit: matched (webhook|retries)", page)
    deprecated = client.get("/ui/?q=retry+forever&status=deprecated").text
    assert re.findall(r'href="/ui/lessons/(pb-\d+)"', deprecated)[:1] == [ids[3]]
    assert "matched by their words" in deprecated
    # Sorting a search by another column keeps the same lessons.
    by_cites = client.get("/ui/?q=webhook+retries&sort=cites").text
    assert set(_ids(by_cites)) == {
        ids[0],
        ids[1],
    }
    # LIKE wildcards in the words are taken literally.
    assert "No lesson" in client.get("/ui/?q=%25&status=deprecated").text


def test_lessons_come_in_pages(make: Any, engine: Engine) -> None:
    with transaction(engine) as session:
        for n in range(30):
            lifecycle.add(
                session, f"Lesson number {n} about topic{n}", learned_from="X-1", actor="t"
            )
    client = make(ui_public_read=True)
    first = client.get("/ui/?sort=newest").text
    second = client.get("/ui/?sort=newest&page=2").text
    ids = _ids
    assert len(ids(first)) == 25 and len(ids(second)) == 5
    assert not set(ids(first)) & set(ids(second))
    assert "Page 1 of 2" in first and 'rel="next"' in first
    # Past the last page shows the last page.
    assert ids(client.get("/ui/?sort=newest&page=9").text) == ids(second)


def test_guessing_the_token_is_slowed_down(make: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from webhooks.ui import access

    monkeypatch.setattr(access, "_failures", {})
    client = make()
    token = _token(client)
    answers = [
        client.post("/ui/login", data={"token": f"guess-{n}", "csrf_token": token}).status_code
        for n in range(access.FAILED_LOGINS + 1)
    ]
    assert answers == [401] * access.FAILED_LOGINS + [429]
    # Even the right token waits: the address is blocked, not the guess.
    blocked = client.post("/ui/login", data={"token": TOKEN, "csrf_token": token})
    assert blocked.status_code == 429 and "wait a minute" in blocked.text
    monkeypatch.setattr(access, "FAILED_WINDOW_SECONDS", 0.0)
    assert client.post("/ui/login", data={"token": TOKEN, "csrf_token": token}).status_code == 302


def test_a_done_delivery_shows_what_a_part_of_the_bot_skipped(make: Any, engine: Engine) -> None:
    from sqlalchemy import update

    from playbook.models import Delivery
    from tests.support import put

    row = put(engine, '{"action": "opened"}', event="pull_request")
    skipped = "acme/app asked for no PR comment (pr_comment: false in .github/playbook-bot.yml)"
    with transaction(engine) as session:
        session.execute(
            update(Delivery).where(Delivery.id == row).values(status="done", reason=skipped)
        )
    client = make()
    _log_in(client)
    page = client.get(f"/ui/deliveries/{row}").text
    assert "acme/app asked for no PR comment (pr_comment: false in" in page

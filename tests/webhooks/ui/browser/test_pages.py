"""The maintainers' web page in a real browser: log in, search, steer lessons, see the loop."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

import pytest
from playwright.sync_api import expect
from sqlalchemy import Engine, select, update

from playbook import clock, db
from playbook.lessons import lifecycle
from playbook.models import Bullet, Delivery, PullRequest, Retrieval, Revision, SideEffect
from playbook.outcomes import usage
from tests.support import put
from tests.webhooks.ui.browser.browsing import Site, log_in

# A real browser: left out of the quick loop too.
pytestmark = [pytest.mark.browser, pytest.mark.slow]

XSS = "<img src=x onerror=alert(1)> Escape user text before it reaches HTML"
TRACEBACK = (
    "Traceback (most recent call last):\n"
    '  File "bot/worker.py", line 210, in _process\n'
    "ValueError: the payload's issue has no key"
)


def _seed(engine: Engine) -> dict[str, str]:
    """A small playbook: lessons with use, a proposal, an XSS lesson, a dead delivery."""
    with db.transaction(engine) as session:
        retry = lifecycle.add(
            session,
            "Retry idempotent HTTP calls with exponential backoff when the upstream answers 503",
            learned_from="PROJ-101",
            actor="cli:seed",
            tags=["http"],
        ).bullet.id
        flaky = lifecycle.add(
            session,
            "Pin the database image version in CI so migrations test what production runs",
            learned_from="acme/api#7",
            actor="cli:seed",
        ).bullet.id
        proposal = lifecycle.add(
            session,
            "Run the formatter before committing generated client code",
            learned_from="PROJ-230",
            actor="agent:claude",
            status="proposed",
            source="agent",
        ).bullet.id
        xss = lifecycle.add(session, XSS, learned_from="PROJ-9", actor="cli:seed").bullet.id
        usage.record_once(session, "loaded", [retry, flaky], ticket_key="PROJ-300", consumer="x")
        usage.record_once(session, "cited", [retry], ticket_key="PROJ-300", consumer="agent:a")
    dead = put(engine, '{"issue": {"number": 5}, "repository": {"full_name": "acme/api"}}')
    with db.transaction(engine) as session:
        session.execute(
            update(Delivery)
            .where(Delivery.id == dead)
            .values(
                status="dead",
                attempts=5,
                error_kind="permanent",
                last_error="ValueError: the payload's issue has no key",
                last_traceback=TRACEBACK,
            )
        )
    return {"retry": retry, "flaky": flaky, "proposal": proposal, "xss": xss, "dead": str(dead)}


def _skipped_comment(engine: Engine, delivery: str, body: str, missing: str, lesson: str) -> None:
    """A lessons comment the delivery could not post, kept with its text."""
    with db.transaction(engine) as session:
        guid = session.get(Delivery, int(delivery)).delivery_id  # type: ignore[union-attr]
        session.add(
            SideEffect(
                delivery_id=guid,
                target="github",
                action="comment",
                ticket_key="acme/api#5",
                status="skipped",
                detail=f"GitHub is not configured: set {missing}",
                body=body,
                purpose="lessons",
                bullet_ids=[lesson],
                at=clock.now() - timedelta(minutes=1),
            )
        )


def test_log_in_search_and_open_a_lesson(serve: Any, page_for: Any) -> None:
    site: Site = serve()
    ids = _seed(site.engine)
    page = page_for(site)

    page.goto(f"{site.url}/ui/")
    expect(page).to_have_url(re.compile(r"/ui/login"))
    site.shot(page, "login")
    page.locator("input[type=password]").fill("not-the-token")
    page.get_by_role("button", name="Log in").click()
    expect(page.get_by_role("alert")).to_contain_text("not the maintainer token")

    log_in(page, site)
    expect(page.get_by_role("heading", name="Lessons")).to_be_visible()
    expect(page.locator("header")).to_contain_text("ui:alice")

    page.locator("input[type=search][name=q]").fill("upstream 503 timeouts in the HTTP client")
    page.get_by_role("button", name="Search").click()
    rows = page.locator("table.lessons tbody tr")
    expect(rows.first).to_contain_text(ids["retry"])
    expect(page.locator(".count")).to_contain_text("ranked as the bot ranks them")
    site.shot(page, "lessons")

    page.get_by_role("link", name=ids["retry"], exact=True).click()
    expect(page).to_have_url(re.compile(rf"/ui/lessons/{ids['retry']}$"))
    expect(page.locator(".lesson-text")).to_contain_text("exponential backoff")
    learned = page.get_by_role("link", name="PROJ-101")
    # Without JIRA_URL a key is shown, not linked; GitHub keys always link.
    expect(learned).to_have_count(0)
    expect(page.locator(".timeline")).to_contain_text("cited")
    expect(page.locator(".timeline")).to_contain_text("loaded")

    # Logging out is the header's button (a POST with the CSRF token), not a link.
    page.get_by_role("button", name="Log out").click()
    expect(page).to_have_url(re.compile(r"/ui/login"))
    page.goto(f"{site.url}/ui/")
    expect(page).to_have_url(re.compile(r"/ui/login"))


def test_deprecate_with_a_reason_then_restore(serve: Any, page_for: Any, logged_in: Any) -> None:
    site: Site = serve(jira_url="https://jira.example.com")
    ids = _seed(site.engine)
    page = page_for(site)
    logged_in(page, site, name="bob")
    page.goto(f"{site.url}/ui/lessons/{ids['flaky']}")
    expect(page.get_by_role("link", name="acme/api#7")).to_have_attribute(
        "href", "https://github.com/acme/api/issues/7"
    )

    # The reason is required: the browser will not send the form without one.
    page.get_by_role("button", name=re.compile("^Deprecate")).click()
    expect(page.locator(".badge.status-active").first).to_be_visible()

    page.get_by_label("Reason").fill("CI now pins by digest instead")
    page.get_by_role("button", name=re.compile("^Deprecate")).click()
    expect(page.locator(".flash.ok")).to_contain_text(f"deprecated {ids['flaky']}")
    expect(page.locator(".demoted")).to_contain_text("CI now pins by digest instead")
    history = page.locator(".revisions")
    expect(history.locator(".revision").first).to_contain_text("deprecate by ui:bob")
    expect(history.locator(".revision").first).to_contain_text("CI now pins by digest instead")
    status_change = history.locator(".revision").first.locator("ins", has_text="deprecated")
    expect(status_change).to_have_count(1)
    site.shot(page, "lesson")

    with db.transaction(site.engine) as session:
        bullet = session.get(Bullet, ids["flaky"])
        assert bullet is not None and bullet.status == "deprecated"
        assert bullet.demoted_reason == "CI now pins by digest instead"
        actors = session.scalars(
            select(Revision.actor).where(Revision.bullet_id == ids["flaky"]).order_by(Revision.id)
        ).all()
    assert actors == ["cli:seed", "ui:bob"]

    page.get_by_role("button", name=re.compile("^Restore")).click()
    expect(page.locator(".flash.ok")).to_contain_text(f"restored {ids['flaky']}")
    expect(page.locator(".demoted")).to_have_count(0)
    expect(page.locator(".revisions .revision").first).to_contain_text("restore by ui:bob")


def test_edit_records_a_revision_with_a_word_diff(
    serve: Any, page_for: Any, logged_in: Any
) -> None:
    site: Site = serve()
    ids = _seed(site.engine)
    page = page_for(site)
    logged_in(page, site)
    page.goto(f"{site.url}/ui/lessons/{ids['retry']}")
    page.get_by_role("link", name="Edit", exact=True).click()
    text = page.get_by_label("Lesson")
    text.fill("Retry idempotent HTTP calls with jittered backoff when the upstream answers 503")
    page.get_by_role("button", name="Save edit").click()
    expect(page.locator(".flash.ok")).to_contain_text(f"saved {ids['retry']}")
    first = page.locator(".revisions .revision").first
    expect(first).to_contain_text("edit by ui:alice")
    expect(first.locator("del", has_text="exponential")).to_have_count(1)
    expect(first.locator("ins", has_text="jittered")).to_have_count(1)

    # A bad edit is refused with the field named, and nothing changes.
    page.get_by_role("link", name="Edit", exact=True).click()
    page.get_by_label("Learned from").fill("   ")
    page.get_by_label("Learned from").evaluate("element => element.removeAttribute('required')")
    page.get_by_role("button", name="Save edit").click()
    expect(page.get_by_role("alert")).to_contain_text("learned_from")


def test_approve_and_reject_proposals(serve: Any, page_for: Any, logged_in: Any) -> None:
    site: Site = serve()
    ids = _seed(site.engine)
    with db.transaction(site.engine) as session:
        other = lifecycle.add(
            session,
            "Never log the webhook secret, even at debug level",
            learned_from="PROJ-231",
            actor="agent:claude",
            status="proposed",
        ).bullet.id
    page = page_for(site)
    logged_in(page, site)
    page.get_by_role("link", name=re.compile("2 proposals waiting")).click()
    expect(page).to_have_url(re.compile("/ui/proposals$"))
    expect(page.locator(".proposal")).to_have_count(2)
    site.shot(page, "proposals")

    page.get_by_role("button", name=f"Approve {ids['proposal']}").click()
    expect(page.locator(".flash.ok")).to_contain_text(f"approved {ids['proposal']}")
    expect(page.locator(".proposal")).to_have_count(1)
    page.get_by_label(f"Reason to reject {other}").fill("too vague to act on")
    page.get_by_role("button", name=f"Reject {other}").click()
    expect(page.locator(".proposal")).to_have_count(0)
    with db.transaction(site.engine) as session:
        approved, rejected = session.get(Bullet, ids["proposal"]), session.get(Bullet, other)
        assert approved is not None and approved.status == "active"
        assert rejected is not None and rejected.status == "deprecated"
        assert rejected.demoted_reason == "too vague to act on"


def test_a_dead_delivery_shows_its_traceback_and_the_comment_it_kept(
    serve: Any, page_for: Any, logged_in: Any
) -> None:
    site: Site = serve()
    ids = _seed(site.engine)
    body = "**Lessons that may help** <script>alert(2)</script>"
    _skipped_comment(site.engine, ids["dead"], body, "GITHUB_APP_ID", ids["retry"])
    page = page_for(site)
    logged_in(page, site)
    page.get_by_role("link", name="Deliveries").click()
    card = page.locator(f"#delivery-{ids['dead']}")
    expect(card.locator(".badge.outcome-dead")).to_be_visible()
    expect(card.get_by_label(f"Traceback of delivery {ids['dead']}")).to_be_visible()
    expect(card.locator("pre.traceback")).to_contain_text("ValueError: the payload's issue")
    expect(card).to_contain_text("acme/api#5")
    body = card.get_by_label("Comment text")
    expect(body).to_contain_text("<script>alert(2)</script>")
    # Still no credentials: no button yet, and the fix is named.
    expect(card.get_by_role("button", name="Post now")).to_have_count(0)
    expect(card).to_contain_text("GITHUB_APP_ID")
    site.shot(page, "deliveries")
    assert site.dialogs == []

    page.get_by_role("link", name=f"#{ids['dead']}", exact=True).click()
    expect(page.locator("pre.payload")).to_contain_text('"full_name": "acme/api"')

    page.goto(f"{site.url}/ui/deliveries?status=done")
    expect(page.locator(".delivery")).to_have_count(0)


def _history(engine: Engine, ids: dict[str, str]) -> None:
    """Ten weeks of the loop: tickets searched, lessons shown and cited, PRs merged or not."""
    now = clock.now()
    with db.transaction(engine) as session:
        for week in range(10):
            at = now - timedelta(weeks=week, hours=1)
            ticket = f"PROJ-{500 + week}"
            shown = [ids["retry"], ids["flaky"]][: 1 + week % 2]
            session.add(
                Retrieval(
                    ticket_key=ticket,
                    query_id=f"q{week}",
                    rank_by="feedback",
                    bullet_ids=shown if week % 3 else [],
                    at=at,
                )
            )
            usage.record(session, "loaded", shown, ticket_key=ticket, ts=at)
            pull = f"acme/api#{100 + week}"
            usage.record(session, "cited", shown[:1], ticket_key=ticket, ts=at, pr_key=pull)
            merged = week % 4 != 1
            session.add(
                PullRequest(
                    key=pull,
                    repo="acme/api",
                    number=100 + week,
                    state="merged" if merged else "closed",
                    updated_at=at,
                    closed_at=at + timedelta(minutes=30),
                    merged_at=at + timedelta(minutes=30) if merged else None,
                )
            )


def test_stats_draws_charts_without_breaking_the_policy(
    serve: Any, page_for: Any, logged_in: Any
) -> None:
    site: Site = serve()
    ids = _seed(site.engine)
    _history(site.engine, ids)
    page = page_for(site)
    logged_in(page, site)
    page.get_by_role("link", name="Stats").click()
    charts = page.locator("figure.chart svg")
    expect(charts).to_have_count(4)
    for index in range(4):
        box = charts.nth(index).bounding_box()
        assert box is not None and box["width"] > 200 and box["height"] > 100
    expect(page.locator(".tiles")).to_contain_text("coverage")
    # Ten weeks of history: no chart says it has nothing to show.
    expect(page.locator("figure.chart")).not_to_contain_text(["No activity yet"])
    site.shot(page, "stats")
    violations = [line for line in site.console if "Content Security Policy" in line]
    assert violations == []


def test_lesson_text_is_shown_as_text_never_run(serve: Any, page_for: Any, logged_in: Any) -> None:
    site: Site = serve()
    ids = _seed(site.engine)
    page = page_for(site)
    logged_in(page, site)
    page.locator("input[type=search][name=q]").fill("escape user text html")
    page.get_by_role("button", name="Search").click()
    expect(page.locator("table.lessons")).to_contain_text("<img src=x onerror=alert(1)>")
    page.goto(f"{site.url}/ui/lessons/{ids['xss']}")
    expect(page.locator(".lesson-text")).to_have_text(XSS)
    expect(page.locator("main img")).to_have_count(0)
    page.wait_for_timeout(300)  # an onerror handler would have run by now
    assert site.dialogs == []


def test_a_post_without_the_csrf_token_is_refused(
    serve: Any, page_for: Any, logged_in: Any
) -> None:
    site: Site = serve()
    ids = _seed(site.engine)
    page = page_for(site)
    logged_in(page, site)
    # The logged-in browser's cookie goes with it, but not the form's token.
    answer = page.request.post(
        f"{site.url}/ui/lessons/{ids['retry']}/deprecate",
        form={"reason": "forged"},
        max_redirects=0,
    )
    assert answer.status == 400
    assert "Reload the page" in answer.text()
    forged = page.request.post(
        f"{site.url}/ui/lessons/{ids['retry']}/deprecate",
        form={"reason": "forged", "csrf_token": "made-up"},
        max_redirects=0,
    )
    assert forged.status == 400
    with db.transaction(site.engine) as session:
        bullet = session.get(Bullet, ids["retry"])
        assert bullet is not None and bullet.status == "active"
    headers = page.goto(f"{site.url}/ui/").headers  # type: ignore[union-attr]
    assert "script-src 'self'" in headers["content-security-policy"]
    assert "unsafe-inline" not in headers["content-security-policy"]
    assert headers["x-frame-options"] == "DENY"
    assert headers["referrer-policy"] == "no-referrer"
    cookie = next(c for c in page.context.cookies() if c["name"] == "playbook_ui")
    assert cookie["httpOnly"] and cookie["sameSite"] == "Lax"


def test_public_read_shows_lessons_but_changes_need_a_login(serve: Any, page_for: Any) -> None:
    site: Site = serve(ui_public_read=True)
    ids = _seed(site.engine)
    page = page_for(site)
    page.goto(f"{site.url}/ui/lessons/{ids['retry']}")
    expect(page.locator(".lesson-text")).to_contain_text("exponential backoff")
    expect(
        page.get_by_role("button", name=re.compile("^(Deprecate|Approve|Restore)"))
    ).to_have_count(0)
    page.goto(f"{site.url}/ui/stats")
    expect(page.locator("figure.chart svg")).to_have_count(4)
    page.goto(f"{site.url}/ui/deliveries")
    expect(page).to_have_url(re.compile(r"/ui/login\?next=/ui/deliveries"))
    log_in_answer = page.request.post(
        f"{site.url}/ui/lessons/{ids['retry']}/deprecate", form={"reason": "x"}, max_redirects=0
    )
    assert log_in_answer.status in (302, 400)
    with db.transaction(site.engine) as session:
        assert session.get(Bullet, ids["retry"]).status == "active"  # type: ignore[union-attr]


def test_pages_fit_a_phone(serve: Any, page_for: Any, logged_in: Any) -> None:
    site: Site = serve()
    ids = _seed(site.engine)
    page = page_for(site, width=390, height=844)
    logged_in(page, site)
    for path in ("/ui/", f"/ui/lessons/{ids['retry']}", "/ui/deliveries", "/ui/stats"):
        page.goto(f"{site.url}{path}")
        overflow = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
        assert overflow <= 1, f"{path} scrolls sideways by {overflow}px at phone width"
    page.goto(f"{site.url}/ui/")
    site.shot(page, "lessons-phone")


def test_post_now_posts_a_skipped_comment_once(serve: Any, page_for: Any, logged_in: Any) -> None:
    from bot.worker import Services, Worker
    from tests.fakes.github import FakeGitHub

    github = FakeGitHub()
    github.personal_tokens.add("ghp_browser")
    github.add_repo("acme/api")
    github.add_issue("acme/api", 5, "Upstream 503s")
    github.start()
    try:
        site: Site = serve(
            github_token="ghp_browser",
            github_api_url=github.url,
            github_seconds_between_requests=0,
            github_seconds_between_writes=0,
        )
        ids = _seed(site.engine)
        body = f"Lessons that may help: {ids['retry']}"
        _skipped_comment(site.engine, ids["dead"], body, "GITHUB_TOKEN", ids["retry"])
        page = page_for(site)
        logged_in(page, site)
        page.goto(f"{site.url}/ui/deliveries")
        card = page.locator(f"#delivery-{ids['dead']}")
        card.get_by_role("button", name="Post now").click()
        # The page queues the post for the worker: the request itself never calls GitHub.
        expect(page.locator(".flash.ok")).to_contain_text("queued: the worker posts")
        assert github.comments_on("acme/api", 5) == []
        card = page.locator(f"#delivery-{ids['dead']}")
        expect(card.get_by_role("button")).to_have_count(0)
        expect(card).to_contain_text("queued")
        worker = Worker(Services(engine=site.engine, settings=site.settings), name="browser")
        while worker.run_once():
            pass
        posted = github.comments_on("acme/api", 5)
        assert len(posted) == 1 and f"Lessons that may help: {ids['retry']}" in posted[0]["body"]
        # Posted: the button is gone, and the comment is logged as done for the delivery.
        page.reload()
        expect(page.locator(f"#delivery-{ids['dead']}").get_by_role("button")).to_have_count(0)
        expect(page.locator(f"#delivery-{ids['dead']}")).to_contain_text("posted")
        again = page.request.post(
            f"{site.url}/ui/deliveries/{ids['dead']}/post",
            form={"csrf_token": "x"},
            max_redirects=0,
        )
        assert again.status == 400
        assert len(github.comments_on("acme/api", 5)) == 1
    finally:
        github.stop()

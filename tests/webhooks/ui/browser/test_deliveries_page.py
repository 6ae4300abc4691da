"""The deliveries list in a real browser: 30 cards with their comments stay a readable page."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from playwright.sync_api import expect
from sqlalchemy import Engine, select

from bot.github import GitHubClients
from playbook import clock, db
from playbook.lessons import lifecycle
from playbook.models import Delivery, SideEffect
from tests.support import put
from tests.webhooks.ui.browser.browsing import Site

pytestmark = [pytest.mark.browser, pytest.mark.slow]

CARDS = 30
# A generous bound per card: a folded card is about 200 px; one whose comment text is shown
# in full, with the missing credentials said twice, was about 570.
PX_PER_CARD = 260


def _comment(n: int) -> str:
    """A lessons comment as the bot writes one: a heading, five lessons, a footer."""
    lessons = "\n".join(
        f"- **pb-{n * 5 + i}** Retry idempotent HTTP calls with exponential backoff when the "
        f"upstream answers 503, and log the attempt number with the request id (lesson {i})."
        for i in range(5)
    )
    return (
        f"### Lessons that may help with acme/api#{n}\n\n{lessons}\n\n"
        "Cite the ids you use in the pull request body: the playbook learns which helped.\n"
        "<sub>playbook-bot · react 👍 or 👎 on a lesson to rate it</sub>"
    )


def _seed(site: Site) -> list[int]:
    """CARDS deliveries, each with a lessons comment kept because GitHub was not configured."""
    engine: Engine = site.engine
    # What the worker records when it cannot post: the same words the page's button uses.
    missing = GitHubClients(site.settings).missing_for(None)
    made = []
    for n in range(1, CARDS + 1):
        payload = f'{{"issue": {{"number": {n}}}, "repository": {{"full_name": "acme/api"}}}}'
        made.append(put(engine, payload))
    with db.transaction(engine) as session:
        # In the order they were made: the n-th delivery is ticket #n (a server need not
        # return rows in insertion order without ORDER BY).
        query = select(Delivery).where(Delivery.id.in_(made)).order_by(Delivery.id)
        rows = session.scalars(query).all()
        for n, row in enumerate(rows, 1):
            row.status = "done"
            session.add(
                SideEffect(
                    delivery_id=row.delivery_id,
                    target="github",
                    action="comment",
                    ticket_key=f"acme/api#{n}",
                    status="skipped",
                    detail=missing,
                    body=_comment(n),
                    purpose="lessons",
                    bullet_ids=[],
                    at=clock.now() - timedelta(minutes=n),
                )
            )
    return made


def test_thirty_deliveries_fold_their_comments_and_say_what_is_missing_once(
    serve: Any, page_for: Any, logged_in: Any
) -> None:
    site: Site = serve()
    made = _seed(site)
    page = page_for(site)
    logged_in(page, site)
    page.goto(f"{site.url}/ui/deliveries")
    expect(page.locator(".delivery")).to_have_count(CARDS)
    height = page.evaluate("document.documentElement.scrollHeight")
    assert height < CARDS * PX_PER_CARD, f"{height} px for {CARDS} deliveries"
    site.shot(page, "deliveries-folded")

    card = page.locator(f"#delivery-{made[0]}")
    body = card.get_by_label("Comment text")
    expect(body).to_be_hidden()
    # The fold says what the comment is, so it can be found without opening it.
    summary = card.locator("details.comment > summary")
    expect(summary).to_contain_text("Lessons that may help with acme/api#1")
    expect(summary).to_contain_text("characters")
    # What is missing is said once per card, not in the skip reason and again by the button.
    assert card.inner_text().count("GITHUB_APP_ID") == 1
    summary.click()
    expect(body).to_be_visible()
    expect(body).to_contain_text("Cite the ids you use")

    # A delivery's own page shows its comment open.
    page.goto(f"{site.url}/ui/deliveries/{made[0]}")
    expect(page.get_by_label("Comment text")).to_be_visible()
    assert site.dialogs == []


def test_the_context_budget_table_looks_like_the_pages_other_tables(
    serve: Any, page_for: Any, logged_in: Any
) -> None:
    site: Site = serve()
    with db.transaction(site.engine) as session:
        lifecycle.add(
            session, "Quote shell arguments in deploy scripts", learned_from="OPS-1", actor="t"
        )
    page = page_for(site)
    logged_in(page, site)
    page.goto(f"{site.url}/ui/stats")
    budget = page.locator("table.budget")
    expect(budget).to_contain_text("global")

    def looks(selector: str) -> dict[str, str]:
        return page.locator(selector).first.evaluate(
            "cell => { const s = getComputedStyle(cell);"
            " return {case: s.textTransform, colour: s.color, padding: s.padding,"
            " border: s.borderBottomStyle}; }"
        )

    page.goto(f"{site.url}/ui/")
    lessons_header = looks("table.lessons th")
    page.goto(f"{site.url}/ui/stats")
    assert looks("table.budget th") == lessons_header
    assert lessons_header["case"] == "uppercase"
    # Numbers line up on the right, as in every other table of the page.
    assert budget.locator("td.num").first.evaluate("cell => getComputedStyle(cell).textAlign") == (
        "right"
    )

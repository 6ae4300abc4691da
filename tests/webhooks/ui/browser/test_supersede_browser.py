"""Superseding a lesson from its page in a real browser, following the links both ways, and
restoring it."""

from __future__ import annotations

import re
from typing import Any

import pytest
from playwright.sync_api import expect

from playbook import db
from playbook.lessons import lifecycle
from playbook.models import Bullet
from tests.webhooks.ui.browser.browsing import Site, log_in

# A real browser: left out of the quick loop too.
pytestmark = [pytest.mark.browser, pytest.mark.slow]


def test_supersede_from_the_page_then_restore(serve: Any, page_for: Any) -> None:
    site: Site = serve()
    with db.transaction(site.engine) as session:
        old = lifecycle.add(session, "Pin the v1 client", learned_from="PAY-1", actor="t").bullet
        new = lifecycle.add(session, "Use the v2 client", learned_from="PAY-2", actor="t").bullet
        old_id, new_id = old.id, new.id
    page = page_for(site)
    log_in(page, site, name="dana")
    page.goto(f"{site.url}/ui/lessons/{old_id}")

    # The replacement is required: the browser will not send the form without one.
    page.get_by_role("button", name="Supersede").click()
    expect(page.locator(".badge.status-active").first).to_be_visible()

    page.get_by_label("Replaced by").fill(new_id)
    page.get_by_label("What changed").fill("the v2 client handles refunds")
    page.get_by_role("button", name="Supersede").click()
    expect(page.locator(".flash.ok")).to_contain_text(f"superseded {old_id} by {new_id}")
    expect(page.locator(".badge.status-superseded").first).to_be_visible()
    card = page.locator(".superseded")
    expect(card).to_contain_text("the v2 client handles refunds")
    history = page.locator(".revisions .revision").first
    expect(history).to_contain_text("supersede by ui:dana")

    card.get_by_role("link", name=new_id).click()
    page.wait_for_url(re.compile(rf"/ui/lessons/{new_id}$"))
    expect(page.locator(".supersedes")).to_contain_text(old_id)
    expect(page.locator(".timeline")).to_contain_text("replaced")
    page.locator(".supersedes").get_by_role("link", name=old_id).click()
    page.wait_for_url(re.compile(rf"/ui/lessons/{old_id}$"))

    page.get_by_role("button", name="Restore").click()
    expect(page.locator(".flash.ok")).to_contain_text(f"restored {old_id}")
    with db.transaction(site.engine) as session:
        bullet = session.get(Bullet, old_id)
        assert bullet is not None and (bullet.status, bullet.superseded_by) == ("active", None)
    assert not [line for line in site.console if line.startswith("error")], site.console

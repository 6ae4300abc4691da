"""Consolidating lessons on /ui/proposals in a real browser: edit the merged text, accept, undo."""

from __future__ import annotations

import re
from typing import Any

import pytest
from playwright.sync_api import expect

from playbook import db
from playbook.models import Bullet
from tests.webhooks.consolidating import open_consolidation
from tests.webhooks.ui.browser.browsing import Site, log_in

# A real browser: left out of the quick loop too.
pytestmark = [pytest.mark.browser, pytest.mark.slow]

TEXTS = (
    "Pin the chromium version in CI so screenshots stay comparable",
    "In CI, pin chromium's version: screenshots change with every chromium release",
)


def test_edit_the_merged_text_accept_and_undo(serve: Any, page_for: Any) -> None:
    site: Site = serve()
    number, members = open_consolidation(site.engine, TEXTS)
    page = page_for(site)
    log_in(page, site, name="erin")
    page.goto(f"{site.url}/ui/proposals")

    card = page.locator(f"#consolidation-{number}")
    expect(card).to_contain_text("longest member — edit before accepting")
    box = card.get_by_label(f"Merged lesson for consolidation {number}")
    expect(box).to_have_value(re.compile("chromium"))
    site.shot(page, "consolidations")
    merged_text = "Pin chromium's version in CI: screenshots change with each release"
    box.fill(merged_text)
    card.get_by_role("button", name=f"Accept consolidation {number}").click()

    flash = page.locator(".flash.ok")
    expect(flash).to_contain_text(f"accepted consolidation {number}: merged lesson")
    merged = re.search(r"merged lesson ([\w-]+)", flash.inner_text())
    assert merged, flash.inner_text()
    with db.transaction(site.engine) as session:
        bullet = session.get(Bullet, merged.group(1))
        assert bullet is not None and (bullet.status, bullet.text) == ("active", merged_text)
        assert [session.get(Bullet, m).status for m in members] == ["superseded"] * 2  # type: ignore[union-attr]

    page.get_by_role("button", name=f"Undo consolidation {number}").click()
    expect(page.locator(".flash.ok")).to_contain_text(f"undid consolidation {number}")
    with db.transaction(site.engine) as session:
        assert [session.get(Bullet, m).status for m in members] == ["active"] * 2  # type: ignore[union-attr]
    assert not [line for line in site.console if line.startswith("error")], site.console

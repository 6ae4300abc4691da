"""GitHub events the bot does not act on: those on the ignore list, and those no handler
takes, are acknowledged (202) and stored as ignored with the reason."""

from __future__ import annotations

import pytest

from bot.handlers import IGNORED
from tests.loop_harness import Loop
from tests.payloads import fixture
from tests.support import last_delivery


@pytest.mark.parametrize(("source", "event"), sorted(IGNORED))
def test_every_event_on_the_ignore_list_is_acknowledged_and_ignored(
    loop: Loop, source: str, event: str
) -> None:
    assert source == "github"
    payload = {"action": "completed", "repository": fixture("issues.opened")["repository"]}
    answer = loop.github_event(f"{event}.completed", payload)
    assert answer.status_code == 202
    loop.process()
    row = last_delivery(loop.engine, event)
    assert row.status == "ignored"
    assert row.reason is not None and "ignore list" in row.reason


def test_an_event_nobody_handles_is_ignored_with_the_reason(loop: Loop) -> None:
    loop.github_event("deployment.created", {"action": "created"})
    loop.process()
    row = last_delivery(loop.engine, "deployment")
    assert (row.status, row.reason) == ("ignored", "no handler for github deployment.created")

"""A PR citing a superseded lesson: the cite stays on it, and its merge rates the lesson that
replaced it too only when PLAYBOOK_SUPERSEDED_CITES_COUNT_FOR_REPLACEMENT says so."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from sqlalchemy import Engine

from playbook.db import transaction
from playbook.lessons import lifecycle
from tests.loop_harness import Loop, start_loop
from tests.payloads import pull_request, pull_request_review


@pytest.fixture(params=[False, True], ids=["off", "on"])
def credited(request, engine: Engine, database_url: str) -> Iterator[tuple[Loop, bool]]:
    credit = request.param
    running = start_loop(
        engine, database_url, PLAYBOOK_SUPERSEDED_CITES_COUNT_FOR_REPLACEMENT=credit
    )
    yield running, credit
    running.github.stop()
    running.jira.stop()


def _counters(engine: Engine, bullet_id: str) -> tuple[int, int]:
    with transaction(engine) as session:
        bullet = lifecycle.get(session, bullet_id)
        return bullet.cites, bullet.cites_success


def test_a_merged_pr_citing_an_old_lesson(credited: tuple[Loop, bool]) -> None:
    loop, credit = credited
    with transaction(loop.engine) as session:
        old = lifecycle.add(session, "Pin the v1 client", learned_from="CTMS-1", actor="t")
        new = lifecycle.add(session, "Use the v2 client", learned_from="CTMS-2", actor="t")
        lifecycle.supersede(session, old.bullet.id, new.bullet.id, actor="maintainer")
    old_id, new_id = old.bullet.id, new.bullet.id
    body = f"Fixes CTMS-4337. Lessons used: {old_id}"
    opened = pull_request("opened", body=body)
    loop.github_event("pull_request.opened", opened)
    # The same lesson named again in a review is the same evidence: still one cite each.
    loop.github_event(
        "pull_request_review.submitted", pull_request_review(opened, f"as {old_id} says")
    )
    loop.github_event("pull_request.closed", pull_request("closed", body=body, merged=True))
    loop.process()
    assert _counters(loop.engine, old_id) == (1, 1)
    assert _counters(loop.engine, new_id) == ((1, 1) if credit else (0, 0))

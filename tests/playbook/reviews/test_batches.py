"""Pending proposals in batches: one PR's review proposals together, newest batch first."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from sqlalchemy import Engine

from playbook.db import transaction
from playbook.lessons import lifecycle
from playbook.reviews import batches

START = datetime(2026, 11, 1, 9, 0, tzinfo=UTC)


def _propose(
    engine: Engine,
    text: str,
    *,
    minutes: int,
    source: str = "review",
    url: str | None = None,
    status: str = "proposed",
) -> str:
    with transaction(engine) as session:
        bullet = lifecycle.add(
            session,
            text,
            learned_from="CTMS-9",
            actor="t",
            status=status,
            source=source,
            source_url=url,
        ).bullet
        bullet.created_at = START + timedelta(minutes=minutes)
        return bullet.id


def test_a_prs_review_proposals_are_one_batch_and_the_newest_batch_comes_first(
    engine: Engine,
) -> None:
    pr7 = "https://github.com/octo-org/widgets/pull/7"
    first = _propose(engine, "Always pin the base image digest", minutes=1, url=f"{pr7}#r1")
    agent = _propose(engine, "Never log tokens in debug", minutes=2, source="mcp", url=None)
    pr8 = _propose(
        engine,
        "Prefer UTC timestamps in every log line",
        minutes=3,
        url="https://github.com/octo-org/widgets/pull/8#issuecomment-5",
    )
    second = _propose(
        engine, "Make sure migrations are reversible", minutes=4, url=f"{pr7}/files#discussion_r9"
    )
    _propose(engine, "Avoid sleeping in tests", minutes=5, url=f"{pr7}#r2", status="active")
    elsewhere = _propose(
        engine,
        "Do not retry a 4xx forever",
        minutes=6,
        source="lessons-section",
        url=f"{pr7}#issue-1",
    )

    with transaction(engine) as session:
        found = batches.batches(session)
        listed = [(b.key, b.url, b.pull, b.ids) for b in found]

    assert listed == [
        (f"{pr7}#issue-1", None, False, [elsewhere]),
        ("octo-org/widgets#7", pr7, True, [first, second]),
        ("octo-org/widgets#8", "https://github.com/octo-org/widgets/pull/8", True, [pr8]),
        ("other", None, False, [agent]),
    ]


def test_only_a_pr_url_names_a_pr_and_parsing_is_bounded() -> None:
    ref = batches.pull_of("https://github.example.com/o/r/pull/0012#discussion_r1")
    assert ref == batches.PullRef("o/r#12", "https://github.example.com/o/r/pull/12")
    for url in (
        None,
        "",
        "javascript:alert(1)//github.com/o/r/pull/7",
        "https://github.com/o/r/issues/7#issuecomment-1",
        "https://github.com/o/r/pull/7x",
        "https://github.com/o/r/pull/",
        "https://github.com/o/r/pull/٣",
        "https://github.com/o/<b>/pull/7",
        "https://github.com/o/r/pull/" + "9" * 11,
        "https://github.com/" + "a/" * 5_000 + "pull/7",
        "https://github.com/o" + "/" * 50_000,
    ):
        assert batches.pull_of(url) is None, url

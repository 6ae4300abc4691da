"""Tickets for the gaps tests: a planted cluster, unrelated tickets, one bug-report template."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

from sqlalchemy import Engine

from playbook import clock
from playbook.db import transaction
from playbook.lessons import lifecycle
from playbook.search import retrieval
from playbook.search.text import Ticket
from tests.support import hit

NOW = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
# Every ticket is filed through the same template: its headings are in all of them.
TEMPLATE = (
    "**Describe the bug**\n{body}\n\n**Environment**\nOperating system: Ubuntu 22.04, "
    "browser: Chrome 120\n\n**Additional context**\nScreenshots and logs attached below.\n"
)
# Four reports of one problem, worded as four reporters would.
CLUSTER = [
    (
        "CTMS-101",
        "Kafka consumer stuck in a rebalance loop after broker restart",
        "The orders consumer group keeps rebalancing and the offset commit fails.",
    ),
    (
        "CTMS-102",
        "Consumer group rebalances forever, CommitFailedException on offset commit",
        "Since the broker restart the kafka consumer never stabilises.",
    ),
    (
        "CTMS-103",
        "Endless kafka rebalance: consumers drop out of the group",
        "Offset commit fails with CommitFailedException while the group rebalances.",
    ),
    (
        "CTMS-104",
        "Orders consumer rebalancing loop, offsets not committed",
        "Kafka consumer group rebalance never ends after a broker restart.",
    ),
]
# Tickets about other things, filed through the same template.
OTHERS = [
    ("CTMS-201", "Checkout button misaligned on Safari", "The pay button overlaps the total."),
    ("CTMS-202", "PDF export misses embedded fonts", "Invoices render in a fallback serif."),
    ("CTMS-203", "Password reset email never arrives", "No mail after pressing reset."),
    ("CTMS-204", "Order dates shown in the wrong timezone", "UTC instead of Berlin time."),
    ("CTMS-205", "Search pagination repeats results", "Page two lists page one's products."),
    ("CTMS-206", "Avatar upload rejects PNG images", "Only JPEG is accepted by the uploader."),
    ("CTMS-207", "Dark mode links have poor contrast", "Blue links on a navy background."),
    ("CTMS-208", "CSV import trims leading zeros of SKUs", "SKU 00123 becomes 123."),
    ("CTMS-209", "Dashboard loads slowly with many widgets", "Twenty widgets take ten seconds."),
    ("CTMS-210", "Typo in the API docs authentication section", "It says barer for bearer."),
]


def ticket(key: str, title: str, body: str) -> Ticket:
    """A ticket of the world, its description filed through the template."""
    scope = key.rsplit("-", 1)[0] if "#" not in key else key.split("#", maxsplit=1)[0]
    return Ticket(key=key, summary=title, description=TEMPLATE.format(body=body), scope=scope)


def searched(
    engine: Engine,
    tickets: list[tuple[str, str, str]],
    *,
    at: datetime = NOW,
    hits: list[retrieval.Hit] | None = None,
) -> None:
    """Log a search for each ticket at ``at`` (an hour apart) that showed ``hits`` (none)."""
    with transaction(engine) as session:
        for n, (key, title, body) in enumerate(tickets):
            clock.set_clock(lambda n=n: at + timedelta(hours=n))
            retrieval.record_shown(
                session, key, hits or [], f"q-{key}", ticket=ticket(key, title, body)
            )
    clock.set_clock(lambda: at + timedelta(days=1))


def a_lesson(engine: Engine) -> retrieval.Hit:
    """An active lesson, as a hit a comment could show."""
    with transaction(engine) as session:
        added = lifecycle.add(
            session,
            "Kafka rebalances after a broker restart: raise max.poll.interval.ms",
            learned_from="CTMS-1",
            scope="CTMS",
            actor="seed",
        )
        bullet_id = getattr(added, "bullet", added).id  # an AddResult, or the bullet itself
    return replace(hit("Kafka rebalances after a broker restart"), bullet_id=bullet_id)

"""Lessons in PR bodies and commands in comments."""

from __future__ import annotations

import pytest

from playbook.lessons.capture import PLAYBOOK_USAGE, Command, commands_in, lessons_in


def test_lessons_section_list_items() -> None:
    body = """Fixes CTMS-4337

## Summary
Retries now carry an idempotency key.

## Lessons
- Stripe retries webhooks for 3 days; every handler must be idempotent.
- Hold no row lock across an HTTP call:
  the payment provider can take 30 s to answer.
* [x] Use `SELECT ... FOR UPDATE SKIP LOCKED` for job queues

## Testing
- ran the suite
"""
    assert lessons_in(body) == [
        "Stripe retries webhooks for 3 days; every handler must be idempotent.",
        "Hold no row lock across an HTTP call: the payment provider can take 30 s to answer.",
        "Use `SELECT ... FOR UPDATE SKIP LOCKED` for job queues",
    ]


def test_lessons_learned_heading_variants_and_paragraphs() -> None:
    body = "**Lessons learned:**\nAlways pin the API version of the client library.\n"
    assert lessons_in(body) == ["Always pin the API version of the client library."]
    assert lessons_in("### lessons learned\n1. Retry with jitter to avoid thundering herds\n") == [
        "Retry with jitter to avoid thundering herds"
    ]


def test_no_section_no_lessons() -> None:
    assert lessons_in("The lessons here are obvious.\n- not a lesson list") == []
    assert lessons_in(None) == []
    assert lessons_in("## Lessons\n<!-- add lessons here -->\n- short\n") == []


def test_commands() -> None:
    body = (
        "Thanks!\n/lesson Run migrations before deploying the worker.\n"
        "/playbook deprecate PB-12 superseded by pb-14\n/playbook approve pb-3\n"
        "/playbook restore\n/playbook delete pb-1\n/lesson hi"
    )
    assert commands_in(body) == [
        Command("lesson", text="Run migrations before deploying the worker."),
        Command("deprecate", bullet_id="pb-12", reason="superseded by pb-14"),
        Command("approve", bullet_id="pb-3"),
        Command("playbook", problem=PLAYBOOK_USAGE),
        Command("playbook", problem=PLAYBOOK_USAGE),
        Command("lesson", problem="write the lesson after /lesson"),
    ]
    assert commands_in("mentions /lesson mid-line are not commands") == []
    assert PLAYBOOK_USAGE.startswith("use /playbook approve|deprecate|restore pb-N [reason]")


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        # Nested items are lessons of their own; an indented line continues its item.
        (
            "## Lessons\n- Retry webhooks with a key\n  and a cap\n  - Log the key on retries\n",
            ["Retry webhooks with a key and a cap", "Log the key on retries"],
        ),
        # A setext heading, an ordered list, task boxes.
        (
            "Lessons learned\n---\n1. [x] Pin the database image\n2) [ ] Run migrations in CI\n",
            ["Pin the database image", "Run migrations in CI"],
        ),
        # "Lessons:" on its own line, its paragraph right under it; code is not a lesson.
        (
            "Lessons:\nAlways set a timeout on HTTP calls\n\n```\nnot a lesson at all\n```\n",
            ["Always set a timeout on HTTP calls"],
        ),
        # The section ends at the next heading, whatever its level.
        (
            "### Lessons\n- Cache the token per process\n# Notes\n- not a lesson here\n",
            ["Cache the token per process"],
        ),
        # The word in a sentence is not a heading.
        ("We learned lessons today:\n- nothing to keep from this\n", []),
    ],
)
def test_lessons_sections_are_read_as_markdown(body: str, expected: list[str]) -> None:
    assert lessons_in(body) == expected

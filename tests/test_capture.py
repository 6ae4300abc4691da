"""Lessons in PR bodies and commands in comments."""

from __future__ import annotations

from playbook.capture import Command, commands_in, lessons_in


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
        Command("playbook", problem="use /playbook approve|deprecate|restore pb-N [reason]"),
        Command("playbook", problem="use /playbook approve|deprecate|restore pb-N [reason]"),
        Command("lesson", problem="write the lesson after /lesson"),
    ]
    assert commands_in("mentions /lesson mid-line are not commands") == []

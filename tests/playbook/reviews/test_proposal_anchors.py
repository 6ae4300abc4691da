"""A proposal from a reviewer's line comment is anchored to the comment's file; others are not."""

from __future__ import annotations

from sqlalchemy import Engine

from playbook.db import transaction
from playbook.lessons import lifecycle
from playbook.reviews import proposals, reflection
from playbook.reviews.proposals import Feedback

PR = "octo-org/widgets#7"
URL = "https://github.com/octo-org/widgets/pull/7#discussion_r1"


def anchors_of(engine: Engine, ids: list[str]) -> list[list[str] | None]:
    with transaction(engine) as session:
        return [lifecycle.get(session, bullet_id).paths for bullet_id in ids]


def test_each_kind_of_feedback_and_hostile_paths(engine: Engine) -> None:
    feedback = [
        Feedback(
            proposals.LINE,
            "alice",
            False,
            "Always release the lock in a finally block.",
            URL,
            path="orders/lock.py",
        ),
        Feedback(
            proposals.LINE,
            "alice",
            False,
            "Never log the card number anywhere.",
            URL,
            path="../../etc/passwd",
        ),
        Feedback(
            proposals.LINE,
            "alice",
            False,
            "Prefer the v2 client for all uploads.",
            URL,
            path="x" * 5000,
        ),
        Feedback(proposals.REVIEW, "alice", False, "Never retry inside a transaction.", URL),
        Feedback(proposals.CONVERSATION, "alice", False, "Always pin the action versions.", URL),
    ]
    with transaction(engine) as session:
        done = proposals.propose(session, feedback, ticket="CTMS-9", scope="CTMS", pr_key=PR)
    # GitHub's path is never a reason to lose the rule: a bad one only leaves it unanchored.
    assert anchors_of(engine, done.added) == [["orders/lock.py"], None, None, None, None]


def test_the_models_lessons_are_anchored_to_the_line_comment_they_rest_on(engine: Engine) -> None:
    line = Feedback(
        proposals.LINE,
        "alice",
        False,
        "Please always release the lock in finally.",
        URL,
        path="orders/lock.py",
    )
    answer = reflection.ReflectionAnswer.model_validate(
        {
            "lessons": [
                {
                    "lesson": "Release the orders lock in a finally block.",
                    "quote": "always release the lock in finally",
                }
            ]
        }
    )
    checked = reflection.checked(answer, [line])
    with transaction(engine) as session:
        done = proposals.propose_texts(
            session,
            checked.kept,
            ticket="CTMS-9",
            scope="CTMS",
            pr_key=PR,
            source=reflection.SOURCE,
        )
    assert anchors_of(engine, done.added) == [["orders/lock.py"]]

"""Which review feedback becomes proposed lessons: trust, duplicates, rejections, the cap."""

from __future__ import annotations

import pytest
from sqlalchemy import Engine

from playbook.db import transaction
from playbook.lessons import lifecycle
from playbook.reviews import proposals
from playbook.reviews.capture_from import CaptureSetting
from playbook.reviews.proposals import Feedback

PR = "octo-org/widgets#7"


def said(body: str, login: str = "alice", *, bot: bool = False, n: int = 1) -> Feedback:
    url = f"https://github.com/octo-org/widgets/pull/7#discussion_r{n}"
    return Feedback(proposals.LINE, login, bot, body, url)


def propose(engine: Engine, *feedback: Feedback) -> proposals.Proposals:
    with transaction(engine) as session:
        return proposals.propose(session, feedback, ticket="CTMS-9", scope="CTMS", pr_key=PR)


def test_only_people_other_than_the_author_and_bots_are_asked_about() -> None:
    feedback = [
        said("x", "coding-agent"),
        said("x", "Alice"),
        said("x", "renovate[bot]", bot=True),
        said("x", "playbook-runner"),
        said("x", "Alice"),
        said("x", "bob"),
        Feedback(proposals.CONVERSATION, None, False, "x", None),  # a deleted account
    ]
    asked = proposals.candidates(feedback, {"coding-agent", None}, "playbook-runner")
    assert asked == ["Alice", "bob"]
    assert [f.login for f in proposals.trusted(feedback, {"bob"})] == ["bob"]
    assert proposals.is_bot("dependabot[bot]", "User") and proposals.is_bot("x", "Bot")


def test_a_rule_is_proposed_once_per_batch_and_not_again_when_in_the_playbook(
    engine: Engine,
) -> None:
    first = propose(
        engine,
        said("Always close the HTTP session in a finally block.", n=1),
        said("always close the http session in a finally block", "bob", n=2),
    )
    assert len(first.added) == 1 and first.skipped == {"repeated": 1}
    assert first.by == ["alice"]
    again = propose(engine, said("Always close the HTTP session in a finally block.", n=3))
    assert again.added == [] and again.skipped == {"in the playbook": 1}
    assert again.summary(PR) == (
        f"{PR}: 0 lessons proposed from review feedback (1 skipped: 1 in the playbook)"
    )


def test_a_proposal_rejected_by_a_maintainer_is_never_proposed_again_even_after_an_edit(
    engine: Engine,
) -> None:
    [bullet_id] = propose(engine, said("Prefer the v2 client for every payment call.")).added
    with transaction(engine) as session:
        lifecycle.edit(
            session, bullet_id, text="Use the v2 client for payment calls.", actor="maintainer"
        )
        lifecycle.deprecate(session, bullet_id, reason="too narrow", actor="maintainer")
    again = propose(
        engine,
        said("Prefer the v2 client for every payment call.", n=2),
        said("Use the v2 client for payment calls.", n=3),
    )
    assert again.added == [] and again.skipped == {"rejected before": 2}


def test_the_bots_own_demotion_of_a_proposal_is_no_rejection(engine: Engine) -> None:
    [bullet_id] = propose(engine, said("Avoid global state in request handlers.")).added
    with transaction(engine) as session:
        lifecycle.deprecate(session, bullet_id, reason="pr_closed_unmerged", actor="playbook-bot")
        assert proposals.rejected_texts(session, "CTMS") == []


def test_a_batch_stops_at_the_cap_and_counts_the_rest(engine: Engine) -> None:
    rules = [
        "Always log the request id.",
        "Never retry inside a database transaction.",
        "Avoid global state in request handlers.",
        "Prefer the v2 client for payment calls.",
        "Always pin third-party action versions.",
        "Never commit generated files to the repository.",
        "Make sure every migration can be rolled back.",
        "Use UTC timestamps in stored records.",
        "Don't swallow exceptions from the queue consumer.",
        "Always validate webhook signatures before parsing.",
        "You should page results from the search endpoint.",
        "Never log personal data such as emails.",
    ]
    done = propose(engine, *(said(rule, n=i) for i, rule in enumerate(rules)))
    assert len(done.added) == proposals.MAX_PROPOSALS
    assert done.skipped == {"over the cap": len(rules) - proposals.MAX_PROPOSALS}


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("off", "off"),
        (False, "off"),
        ("HEURISTIC", "heuristic"),
        (True, "heuristic"),
        (" Model ", "model"),
    ],
)
def test_the_setting_reads_yaml_booleans_and_any_case(given: object, expected: str) -> None:
    from pydantic import TypeAdapter, ValidationError

    adapter = TypeAdapter(CaptureSetting)
    assert adapter.validate_python(given).value == expected
    with pytest.raises(ValidationError, match="heuristic"):
        adapter.validate_python("llm")

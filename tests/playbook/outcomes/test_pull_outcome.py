"""The pull-request outcome rule: decide and judge as tables and properties, apply once."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st
from sqlalchemy import Engine, func, select

from playbook import clock
from playbook.db import transaction
from playbook.lessons import lifecycle
from playbook.models import PullRequest, Revision
from playbook.outcomes import pull_outcome, tracking
from playbook.outcomes.demote_policy import DemotePolicy
from playbook.outcomes.pull_outcome import (
    DEMOTED_UNMERGED,
    Access,
    Closer,
    LessonFacts,
    Move,
    Need,
    PullFacts,
    Step,
    decide,
    judge,
)
from playbook.outcomes.tracking import PullRequestState

T0 = datetime(2026, 11, 3, 9, 0, tzinfo=UTC)
REPO = "acme/api"


def seen(state: str = "closed", *, at: datetime | None = T0) -> PullRequestState:
    return PullRequestState(
        key=f"{REPO}#7",
        repo=REPO,
        number=7,
        title="Fix retries",
        head_ref="CTMS-7-retries",
        url=f"https://github.com/{REPO}/pull/7",
        state=state,
        updated_at=at,
        closed_at=at if state != "open" else None,
        merged_at=at if state == "merged" else None,
    )


def facts(state: str = "closed", **changes: object) -> PullFacts:
    base = PullFacts(seen=seen(state), news=True, closer=Closer("maria", opener="agent-7"))
    return replace(base, **changes)  # type: ignore[arg-type]


OWN_BOT = Closer("agent-7[bot]", is_bot=True, opener="agent-7[bot]")
OWN_AGENT = Closer("Agent-7", opener="Agent-7")
OWN_PERSON = Closer("maria", opener="maria")
BOT_NOT_OWN = Closer("other[bot]", is_bot=True, opener="agent-7")
NO_ACCESS = "maria has no write access to acme/api"
UNCONFIGURED = "GitHub is not configured, so maria's access to acme/api cannot be checked"


@pytest.mark.parametrize(
    ("given_facts", "step", "need", "reason", "demote"),
    [
        # No outcome yet: open, or an older delivery than the one stored.
        (facts("open"), Step.WAIT, None, None, False),
        (facts(news=False), Step.WAIT, None, None, False),
        (facts("merged", news=False), Step.WAIT, None, None, False),
        # The same closing seen again; a later closing (reopened, closed again) is new.
        (facts(applied=f"closed@{T0.isoformat()}"), Step.APPLIED, None, None, False),
        (facts("merged", applied=f"merged@{T0.isoformat()}"), Step.APPLIED, None, None, False),
        (
            facts(applied="closed@2020-01-01T00:00:00+00:00", access=Access.WRITE),
            Step.APPLY,
            None,
            None,
            True,
        ),
        # Merging needs write access already: nobody is asked about the closer.
        (facts("merged", closer=Closer(None)), Step.APPLY, None, None, True),
        (facts("merged", policy=DemotePolicy.NEEDS_REVIEW), Step.APPLY, None, None, False),
        # Who closed it unmerged.
        (facts(closer=Closer(None)), Step.IGNORED, None, "who closed it is unknown", False),
        (facts(closer=Closer("")), Step.IGNORED, None, "who closed it is unknown", False),
        (facts(closer=OWN_BOT), Step.APPLY, None, None, True),
        (facts(closer=OWN_AGENT, agents=frozenset({"agent-7"})), Step.APPLY, None, None, True),
        (facts(closer=OWN_AGENT, agents=frozenset({"AGENT-7"})), Step.APPLY, None, None, True),
        (facts(closer=OWN_PERSON), Step.ASK, Need.ACCESS, None, False),
        (facts(closer=BOT_NOT_OWN), Step.ASK, Need.ACCESS, None, False),
        (facts(agents=frozenset({"maria"})), Step.ASK, Need.ACCESS, None, False),
        (facts(), Step.ASK, Need.ACCESS, None, False),
        (facts(access=Access.WRITE), Step.APPLY, None, None, True),
        (facts(access=Access.NONE), Step.IGNORED, None, NO_ACCESS, False),
        (facts(access=Access.UNKNOWN), Step.IGNORED, None, UNCONFIGURED, False),
        # The policy and the review flag, asked after the closer.
        (
            facts(policy=DemotePolicy.NEEDS_REVIEW),
            Step.ASK,
            Need.ACCESS,
            None,
            False,
        ),
        (
            facts(policy=DemotePolicy.NEEDS_REVIEW, access=Access.WRITE),
            Step.ASK,
            Need.TICKET_FLAG,
            None,
            False,
        ),
        (
            facts(
                policy=DemotePolicy.NEEDS_REVIEW,
                access=Access.WRITE,
                labels=("Needs-Human-Review",),
            ),
            Step.APPLY,
            None,
            None,
            True,
        ),
        (
            facts(
                policy=DemotePolicy.NEEDS_REVIEW,
                closer=OWN_BOT,
                labels=("x", "triage"),
                review_label="Triage",
            ),
            Step.APPLY,
            None,
            None,
            True,
        ),
        (
            facts(policy=DemotePolicy.NEEDS_REVIEW, access=Access.WRITE, ticket_flagged=True),
            Step.APPLY,
            None,
            None,
            True,
        ),
        (
            facts(policy=DemotePolicy.NEEDS_REVIEW, access=Access.WRITE, ticket_flagged=False),
            Step.APPLY,
            None,
            None,
            False,
        ),
        # A refused closer is refused whatever the flag says.
        (
            facts(
                policy=DemotePolicy.NEEDS_REVIEW, access=Access.NONE, labels=("needs-human-review",)
            ),
            Step.IGNORED,
            None,
            NO_ACCESS,
            False,
        ),
    ],
)
def test_decide(
    given_facts: PullFacts, step: Step, need: Need | None, reason: str | None, demote: bool
) -> None:
    verdict = decide(given_facts)
    full = f"{REPO}#7 closed without merge, but {reason}; outcome not applied" if reason else None
    assert (verdict.step, verdict.need, verdict.reason, verdict.demote) == (
        step,
        need,
        full,
        demote,
    )


def test_the_outcome_key_names_the_closing_and_the_actor_the_bot() -> None:
    assert decide(facts("merged")).key == "merged@2026-11-03T09:00:00+00:00"
    assert decide(facts()).key == "closed@2026-11-03T09:00:00+00:00"
    no_times = replace(seen(), closed_at=None, updated_at=T0 + timedelta(hours=1))
    assert pull_outcome.outcome_key(no_times) == "closed@2026-11-03T10:00:00+00:00"
    assert pull_outcome.outcome_key(replace(no_times, updated_at=None)) == "closed@?"
    verdict = decide(facts(access=Access.WRITE, bot="lessons-bot"))
    assert verdict.actor == "lessons-bot (acme/api#7 closed)"
    assert verdict.evidence_at == T0


closers = st.builds(
    Closer,
    login=st.sampled_from([None, "", "maria", "Agent-7", "agent-7[bot]"]),
    is_bot=st.booleans(),
    opener=st.sampled_from([None, "maria", "Agent-7", "agent-7[bot]"]),
)
all_facts = st.builds(
    PullFacts,
    seen=st.sampled_from([seen("open"), seen("closed"), seen("merged"), seen(at=None)]),
    news=st.booleans(),
    applied=st.sampled_from([None, f"closed@{T0.isoformat()}", "merged@?"]),
    closer=closers,
    agents=st.frozensets(st.sampled_from(["agent-7", "maria"])),
    policy=st.sampled_from(list(DemotePolicy)),
    labels=st.lists(st.sampled_from(["needs-human-review", "NEEDS-HUMAN-REVIEW", "bug"])).map(
        tuple
    ),
    access=st.sampled_from([None, *Access]),
    ticket_flagged=st.sampled_from([None, True, False]),
)


@given(all_facts, st.sampled_from(list(Access)), st.booleans())
def test_answering_what_decide_asks_ends_in_a_verdict(
    start: PullFacts, access: Access, flagged: bool
) -> None:
    asked: list[Need] = []
    current, verdict = start, decide(start)
    while verdict.step is Step.ASK:
        assert verdict.need is not None and verdict.need not in asked
        asked.append(verdict.need)
        if verdict.need is Need.ACCESS:
            current = replace(current, access=access)
        else:
            current = replace(current, ticket_flagged=flagged)
        verdict = decide(current)
    # Access first, and only then the flags; a merge never asks about the closer.
    assert asked in ([], [Need.ACCESS], [Need.TICKET_FLAG], [Need.ACCESS, Need.TICKET_FLAG])
    merged = start.seen.state == "merged"
    if merged:
        assert Need.ACCESS not in asked and verdict.step is not Step.IGNORED
    if Need.TICKET_FLAG in asked:
        assert start.policy is DemotePolicy.NEEDS_REVIEW and not merged
    if verdict.step is Step.APPLY and start.policy is DemotePolicy.ALWAYS:
        assert verdict.demote
    if verdict.step is Step.IGNORED:
        assert not merged and verdict.reason and verdict.reason.startswith(f"{REPO}#7 closed")
    assert decide(current) == verdict  # the same facts, the same verdict


@pytest.mark.parametrize(
    ("lesson", "merged", "demote", "move", "why"),
    [
        (LessonFacts("pb-1", "CTMS-7", "proposed"), True, True, Move.APPROVE, None),
        (LessonFacts("pb-1", "CTMS-7", "active"), True, True, Move.NONE, None),
        (
            LessonFacts("pb-1", "CTMS-7", "deprecated", DEMOTED_UNMERGED),
            True,
            False,
            Move.RESTORE,
            None,
        ),
        (
            LessonFacts("pb-1", "CTMS-7", "deprecated", "wrong for async"),
            True,
            True,
            Move.NONE,
            None,
        ),
        (LessonFacts("pb-1", "CTMS-7", "archived", DEMOTED_UNMERGED), True, True, Move.NONE, None),
        # A merge does not bring back a lesson whose own PR was closed unmerged.
        (
            LessonFacts(
                "pb-1", "CTMS-7", "deprecated", DEMOTED_UNMERGED, own_pull=("acme/api#6", "closed")
            ),
            True,
            True,
            Move.KEEP,
            "its own PR acme/api#6 is closed",
        ),
        (
            LessonFacts("pb-1", "CTMS-7", "proposed", own_pull=("acme/api#6", "merged")),
            True,
            True,
            Move.APPROVE,
            None,
        ),
        # ... which says nothing when this PR closed unmerged.
        (
            LessonFacts("pb-1", "CTMS-7", "active", own_pull=("acme/api#6", "open")),
            False,
            True,
            Move.DEPRECATE,
            None,
        ),
        (LessonFacts("pb-1", "CTMS-7", "active"), False, True, Move.DEPRECATE, None),
        (LessonFacts("pb-1", "CTMS-7", "proposed"), False, True, Move.DEPRECATE, None),
        (LessonFacts("pb-1", "CTMS-7", "active"), False, False, Move.NONE, None),
        (LessonFacts("pb-1", "CTMS-7", "deprecated"), False, True, Move.NONE, None),
        (LessonFacts("pb-1", "CTMS-7", "archived"), False, True, Move.NONE, None),
        (
            LessonFacts("pb-1", "CTMS-7", "active", alive=("acme/api#8", "acme/api#9")),
            False,
            True,
            Move.KEEP,
            "CTMS-7 still has acme/api#8, acme/api#9",
        ),
        (
            LessonFacts("pb-1", "CTMS-7", "proposed", alive=("acme/api#8",)),
            True,
            True,
            Move.APPROVE,
            None,
        ),
        # A person's later decision outranks either outcome.
        (
            LessonFacts("pb-1", "CTMS-7", "active", changed_by_hand=True),
            False,
            True,
            Move.KEEP,
            "changed by hand after this outcome",
        ),
        (
            LessonFacts("pb-1", "CTMS-7", "deprecated", DEMOTED_UNMERGED, changed_by_hand=True),
            True,
            True,
            Move.KEEP,
            "changed by hand after this outcome",
        ),
    ],
)
def test_judge(
    lesson: LessonFacts, merged: bool, demote: bool, move: Move, why: str | None
) -> None:
    verdict = judge(lesson, merged, demote)
    assert (verdict.bullet_id, verdict.move, verdict.why) == ("pb-1", move, why)


def closed_pr_with_a_lesson(engine: Engine) -> str:
    clock.set_clock(lambda: T0 - timedelta(days=1))
    with transaction(engine) as session:
        bullet = lifecycle.add(
            session, "Retry webhooks with a key", learned_from="CTMS-7", actor="t"
        )
        tracking.observe(session, seen("open", at=T0 - timedelta(days=1)))
        tracking.link(session, f"{REPO}#7", [("CTMS-7", "jira")])
    clock.set_clock(lambda: T0)
    return bullet.bullet.id


def revisions(engine: Engine) -> int:
    with transaction(engine) as session:
        return session.scalar(select(func.count()).select_from(Revision)) or 0


def test_apply_counts_one_closing_once(engine: Engine) -> None:
    bullet_id = closed_pr_with_a_lesson(engine)
    verdict = decide(PullFacts(seen=seen(), news=True, closer=OWN_BOT))
    assert verdict.step is Step.APPLY
    with transaction(engine) as session:
        outcome = pull_outcome.apply(session, verdict)
    assert outcome is not None and outcome.demoted == [bullet_id]
    with transaction(engine) as session:
        bullet = lifecycle.get(session, bullet_id)
        assert (bullet.status, bullet.demoted_reason) == ("deprecated", DEMOTED_UNMERGED)
        assert session.get(PullRequest, f"{REPO}#7").outcome_evidence == verdict.key  # type: ignore[union-attr]
    before = revisions(engine)
    with transaction(engine) as session:
        assert pull_outcome.apply(session, verdict) is None
    assert revisions(engine) == before


def test_apply_takes_only_a_verdict_to_apply(engine: Engine) -> None:
    with transaction(engine) as session, pytest.raises(ValueError, match="ask"):
        pull_outcome.apply(session, decide(facts()))


def test_the_bot_is_known_by_its_identity_not_by_how_an_actor_string_begins(
    engine: Engine,
) -> None:
    bullet_id = closed_pr_with_a_lesson(engine)
    with transaction(engine) as session:
        tracking.observe(session, seen())
        pull = session.get(PullRequest, f"{REPO}#7")
        assert pull is not None
        # After the closing the bot itself changes the lesson; then the PR's outcome arrives.
        clock.set_clock(lambda: T0 + timedelta(hours=1))
        lifecycle.deprecate(session, bullet_id, reason="x", actor="lessons-bot (other work)")
        lifecycle.restore(session, bullet_id, actor="lessons-bot (other work)")
        mine = pull_outcome.settle(session, pull, bot="lessons-bot", evidence_at=T0)
        assert mine.demoted == [bullet_id] and mine.kept_because == {}
        lifecycle.restore(session, bullet_id, actor="lessons-bot (other work)")
        # Another bot name: those revisions are someone else's decision, newer than the closing.
        theirs = pull_outcome.settle(session, pull, bot="playbook-bot", evidence_at=T0)
        assert theirs.demoted == []
        assert theirs.kept_because == {bullet_id: "changed by hand after this outcome"}

"""Reverts: the signals that link a revert to its PR, the lesson rule, the experiment's outcome."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlalchemy import Engine

from playbook import db
from playbook.experiment import outcomes as experiment_outcomes
from playbook.models import ExperimentAssignment, PullRequest
from playbook.outcomes import pull_outcome, revert_signals, reverts, tracking
from playbook.outcomes.pull_outcome import Access, Closer, Move, Need, PullFacts, Step, decide
from playbook.outcomes.reverts import RevertedLesson, judge_reverted, judge_unreverted
from playbook.outcomes.tracking import PullRequestState

REPO = "acme/api"
T0 = datetime(2026, 11, 3, 9, 0, tzinfo=UTC)
SHA = "0123456789abcdef0123456789abcdef01234567"


# --- the signals -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "number"),
    [
        ("Reverts acme/api#12", 12),  # GitHub's revert button
        ("Reverts ACME/Api#12\n\nIt broke checkout.", 12),  # GitHub's names are case-blind
        ("Reverts #12", 12),
        ("Why: it broke checkout\nreverts #12.", 12),
        ("Reverts other/api#12", None),  # another repository's PR is not this one's
        ("Reverts acme/api-v2#12", None),
        ("This reverts some of #12", None),  # a mention is no revert
        ("We may revert #12 later; Reverting #12 now", None),
        ("Reverts the retry change in #12", None),
        ("Reverts #0", None),
        ("Reverts #99999999999", None),
        ("Reverts #١٢", None),  # Arabic-Indic digits are not a PR number
        ("", None),
        (None, None),
    ],
)
def test_body_names_the_reverted_pr_of_the_same_repository(body, number) -> None:
    assert revert_signals.in_body(body, REPO) == number


@pytest.mark.parametrize(
    ("branch", "number"),
    [
        ("revert-12-feature/retries", 12),
        ("revert-13-revert-12-feature/retries", 13),
        ("revert-12-", None),
        ("revert-twelve-x", None),
        ("reverting-12-x", None),
        ("feature/revert-12-x", None),
        ("", None),
    ],
)
def test_branch_names_the_reverted_pr_as_the_button_names_it(branch, number) -> None:
    assert revert_signals.in_branch(branch) == number


def test_commit_messages_name_the_shas_git_reverts() -> None:
    merge = "f" * 40
    messages = [
        f'Revert "Dedupe retries"\n\nThis reverts commit {SHA}.',
        f"Revert merge\n\nThis reverts commit {merge}, reversing\nchanges made to {'e' * 40}.",
        f"This reverts commit {SHA.upper()}.",  # the same sha once
        "This reverts commit 1a2b3c4 (Dedupe retries, 2026-11-03).",  # --reference
        "This reverts commit 123456.",  # too short for a sha
        f"This reverts commit {'a' * 65}",  # too long
        "We should revert the retry commit",
        None,
    ]
    assert revert_signals.in_commits(messages) == [SHA, merge, "1a2b3c4"]


def test_commit_sha_keeps_only_hex_ids() -> None:
    assert revert_signals.commit_sha(SHA.upper()) == SHA
    assert revert_signals.commit_sha("abc") is None
    assert revert_signals.commit_sha("g" * 40) is None
    assert revert_signals.commit_sha(None) is None


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=2_000), st.text(max_size=300))
def test_parsers_take_any_text(text: str, branch: str) -> None:
    number = revert_signals.named_number(text, branch, REPO)
    assert number is None or 1 <= number < 2**31
    for sha in revert_signals.in_commits([text]):
        assert revert_signals.commit_sha(sha) == sha


def test_parsers_are_linear_on_hostile_text() -> None:
    # Long runs of what each parser looks for; a backtracking pattern would not finish.
    hostile = "Reverts " * 20_000 + "\n" + "This reverts commit " * 5_000 + "a" * 70
    assert revert_signals.in_body(hostile, REPO) is None
    assert revert_signals.in_commits([hostile]) == []
    assert revert_signals.in_branch("revert-" + "1" * 100_000 + "-x") is None


# --- the rules ---------------------------------------------------------------------------------


def _seen(number: int, state: str, at: datetime, **extra: object) -> PullRequestState:
    return PullRequestState(
        key=f"{REPO}#{number}",
        repo=REPO,
        number=number,
        title=f"PR {number}",
        head_ref=str(extra.pop("head_ref", "work")),
        url=f"https://github.com/{REPO}/pull/{number}",
        state=state,
        updated_at=at,
        closed_at=at if state != "open" else None,
        merged_at=at if state == "merged" else None,
        **extra,  # type: ignore[arg-type]
    )


def test_a_revert_merge_needs_a_merger_with_write_access() -> None:
    facts = PullFacts(
        seen=_seen(8, "merged", T0), news=True, closer=Closer("drive-by"), reverts=f"{REPO}#7"
    )
    assert decide(facts).need is Need.ACCESS
    refused = decide(PullFacts(**{**facts.__dict__, "access": Access.NONE}))
    assert refused.step is Step.IGNORED
    assert refused.reason == (
        f"{REPO}#8 reverts {REPO}#7, but drive-by has no write access to {REPO}; "
        "outcome not applied"
    )
    assert decide(PullFacts(**{**facts.__dict__, "access": Access.WRITE})).step is Step.APPLY
    # A merge that reverts nothing needs no one's say, as before.
    assert decide(PullFacts(seen=_seen(8, "merged", T0), news=True)).step is Step.APPLY


def test_judging_the_lessons_of_a_reverted_pr() -> None:
    active = RevertedLesson("pb-1", "active")
    assert judge_reverted(active).move is Move.DEPRECATE
    assert judge_reverted(RevertedLesson("pb-1", "proposed")).move is Move.DEPRECATE
    assert judge_reverted(RevertedLesson("pb-1", "archived")).move is Move.NONE
    by_hand = judge_reverted(RevertedLesson("pb-1", "active", changed_by_hand=True))
    assert (by_hand.move, by_hand.why) == (Move.KEEP, "changed by hand after the revert")
    other = RevertedLesson("pb-1", "active", alive=(f"{REPO}#9",))
    assert judge_reverted(other).move is Move.KEEP
    # A lesson from the reverted PR's own Lessons section goes with it, whatever else is open.
    own = RevertedLesson("pb-1", "active", captured_here=True, alive=(f"{REPO}#9",))
    assert judge_reverted(own).move is Move.DEPRECATE

    demoted = RevertedLesson("pb-1", "deprecated", demoted_reason=f"reverted ({REPO}#8)")
    assert judge_unreverted(demoted, f"{REPO}#8").move is Move.RESTORE
    assert judge_unreverted(demoted, f"{REPO}#10").move is Move.NONE  # another revert's
    closed = RevertedLesson("pb-1", "deprecated", demoted_reason="pr_closed_unmerged")
    assert judge_unreverted(closed, f"{REPO}#8").move is Move.NONE
    kept = RevertedLesson(
        "pb-1", "deprecated", demoted_reason=f"reverted ({REPO}#8)", changed_by_hand=True
    )
    assert judge_unreverted(kept, f"{REPO}#8").move is Move.KEEP


def _merge(engine: Engine, seen: PullRequestState, body: str = "") -> list[reverts.RevertChange]:
    """A PR for PB-7 merged by a maintainer, applied as the handler applies it."""
    with db.transaction(engine) as session:
        tracking.observe(session, seen)
        tracking.link(session, seen.key, [("PB-7", "jira")])
        target = reverts.note(session, seen, body, news=True)
        facts = PullFacts(
            seen=seen, news=True, reverts=target, closer=Closer("maintainer"), access=Access.WRITE
        )
        pull_outcome.apply(session, decide(facts))
        return reverts.follow(session, seen.key)


def test_a_reverted_pr_is_no_merge_of_its_ticket_in_the_experiment(engine: Engine) -> None:
    with db.transaction(engine) as session:
        session.add(
            ExperimentAssignment(
                ticket_key="PB-7",
                arm="shown",
                percent=10,
                assigned_at=T0,
                ticket_ref="PB-7",
                created_at=T0,
            )
        )
    _merge(engine, _seen(7, "merged", T0))
    changes = _merge(engine, _seen(8, "merged", T0 + timedelta(hours=1)), f"Reverts #{7}")
    assert [(c.pull, c.now, c.was) for c in changes] == [(f"{REPO}#7", f"{REPO}#8", None)]
    with db.transaction(engine) as session:
        row = session.get(ExperimentAssignment, "PB-7")
        # The revert quotes the ticket in its title but is no attempt at it; the reverted
        # merge is work the team undid, so the ticket counts as closed without a merge.
        assert (row.outcome, row.merged_at, row.closed_unmerged) == ("closed", None, True)
    # Reverting the revert brings the merge back.
    _merge(engine, _seen(9, "merged", T0 + timedelta(hours=2)), "Reverts #8")
    with db.transaction(engine) as session:
        row = session.get(ExperimentAssignment, "PB-7")
        assert (row.outcome, row.merged_at) == ("merged", T0)
        assert session.get(PullRequest, f"{REPO}#7").reverted_by is None
        assert session.get(PullRequest, f"{REPO}#8").reverted_by == f"{REPO}#9"
        assert experiment_outcomes.refresh(session, ["PB-7"]) == 0  # stored from the truth


def test_a_revert_merged_before_its_target_reverts_nothing(engine: Engine) -> None:
    _merge(engine, _seen(8, "merged", T0), "Reverts #7")
    assert _merge(engine, _seen(7, "merged", T0 + timedelta(hours=1))) == []
    with db.transaction(engine) as session:
        assert session.get(PullRequest, f"{REPO}#7").reverted_by is None


def test_reverts_that_name_each_other_stop(engine: Engine) -> None:
    """Forged bodies naming each other, merged at the same moment: the walk ends."""
    _merge(engine, _seen(7, "merged", T0), "Reverts #8")
    _merge(engine, _seen(8, "merged", T0), "Reverts #7")
    with db.transaction(engine) as session:
        assert session.get(PullRequest, f"{REPO}#7").reverted_by is None
        assert session.get(PullRequest, f"{REPO}#8").reverted_by is None


def test_a_later_merge_for_the_ticket_brings_back_what_a_revert_demoted() -> None:
    from playbook.outcomes.pull_outcome import LessonFacts, judge

    reason = f"reverted ({REPO}#8)"
    learned = LessonFacts("pb-1", "CTMS-1", "deprecated", demoted_reason=reason)
    assert judge(learned, merged=True, demote=True).move is Move.RESTORE
    # Captured from the reverted PR's own Lessons section: it follows that PR.
    captured = LessonFacts(
        "pb-2", "CTMS-1", "deprecated", demoted_reason=reason, own_pull=(f"{REPO}#7", "reverted")
    )
    kept = judge(captured, merged=True, demote=True)
    assert (kept.move, kept.why) == (Move.KEEP, f"its own PR {REPO}#7 is reverted")

"""Experiment tickets' outcomes from their linked pull requests and reviews, from the truth."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from sqlalchemy import Engine, func, select

from playbook import db
from playbook.experiment import outcomes
from playbook.models import ExperimentAssignment, ExperimentReview
from playbook.outcomes import tracking
from playbook.outcomes.tracking import PullRequestState
from tests.loop_harness import Loop
from tests.payloads import pull_request, pull_request_review
from tests.support import last_delivery

T0 = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)
HOUR = timedelta(hours=1)


def _enrolled(engine: Engine, ticket_ref: str, arm: str = "shown") -> None:
    """An experiment ticket, as enrollment stores it (canonical key, the bot's spelling)."""
    from playbook.experiment.assignment import canonical

    with db.transaction(engine) as session:
        session.add(
            ExperimentAssignment(
                ticket_key=canonical(ticket_ref),
                arm=arm,
                percent=10,
                assigned_at=T0,
                ticket_ref=ticket_ref,
                created_at=T0,
            )
        )


def _pull(
    engine: Engine,
    number: int,
    state: str,
    at: datetime,
    tickets: tuple[str, ...] = ("PB-7",),
) -> str:
    """A PR of acme/api in ``state`` (closed/merged at ``at``), linked to ``tickets``."""
    key = f"acme/api#{number}"
    seen = PullRequestState(
        key=key,
        repo="acme/api",
        number=number,
        title=f"PR {number}",
        head_ref="work",
        url=None,
        state=state,
        updated_at=at,
        closed_at=at if state != "open" else None,
        merged_at=at if state == "merged" else None,
    )
    with db.transaction(engine) as session:
        tracking.observe(session, seen)
        tracking.link(session, key, [(ticket, "jira") for ticket in tickets])
    return key


def _refresh(engine: Engine, *tickets: str) -> int:
    with db.transaction(engine) as session:
        return outcomes.refresh(session, tickets)


def _row(engine: Engine, key: str = "PB-7") -> tuple[str | None, datetime | None, bool, int]:
    with db.transaction(engine) as session:
        row = session.get(ExperimentAssignment, key)
        assert row is not None
        return row.outcome, row.merged_at, row.closed_unmerged, row.review_rounds


def _review(engine: Engine, review_id: int, pr_key: str, at: datetime, state: str) -> bool:
    with db.transaction(engine) as session:
        return outcomes.record_review(session, review_id, pr_key, state, at)


def test_no_pull_request_is_no_outcome_and_an_open_one_is_open(engine: Engine) -> None:
    _enrolled(engine, "PB-7")
    assert _refresh(engine, "PB-7") == 0
    assert _row(engine) == (None, None, False, 0)
    _pull(engine, 1, "open", T0 + HOUR)
    assert _refresh(engine, "PB-7") == 1
    assert _row(engine) == ("open", None, False, 0)


def test_a_ticket_closed_then_merged_counts_as_merged_and_keeps_the_closing(
    engine: Engine,
) -> None:
    _enrolled(engine, "PB-7")
    _pull(engine, 1, "closed", T0 + HOUR)
    _refresh(engine, "PB-7")
    assert _row(engine) == ("closed", None, True, 0)
    _pull(engine, 2, "merged", T0 + 5 * HOUR)
    _pull(engine, 3, "merged", T0 + 9 * HOUR)
    assert _refresh(engine, "PB-7") == 1
    # The first merge is the ticket's time to merge; the closing stays known.
    assert _row(engine) == ("merged", T0 + 5 * HOUR, True, 0)


def test_closed_unmerged_beside_a_pull_request_still_open_is_open(engine: Engine) -> None:
    _enrolled(engine, "PB-7")
    _pull(engine, 1, "closed", T0 + HOUR)
    _pull(engine, 2, "open", T0 + 2 * HOUR)
    _refresh(engine, "PB-7")
    assert _row(engine) == ("open", None, True, 0)


def test_review_rounds_count_changes_requested_before_the_first_merge_only(
    engine: Engine,
) -> None:
    _enrolled(engine, "PB-7")
    first = _pull(engine, 1, "open", T0 + HOUR)
    assert _review(engine, 11, first, T0 + 2 * HOUR, "changes_requested")
    assert _review(engine, 12, first, T0 + 3 * HOUR, "CHANGES_REQUESTED")  # the REST spelling
    assert not _review(engine, 13, first, T0 + 3 * HOUR, "approved")
    assert not _review(engine, 14, first, T0 + 3 * HOUR, "commented")
    _refresh(engine, "PB-7")
    assert _row(engine) == ("open", None, False, 2)  # all so far while nothing merged
    _pull(engine, 1, "merged", T0 + 4 * HOUR)
    assert _review(engine, 15, first, T0 + 6 * HOUR, "changes_requested")  # after the merge
    _refresh(engine, "PB-7")
    assert _row(engine) == ("merged", T0 + 4 * HOUR, False, 2)


def test_a_redelivered_review_counts_once_and_a_refresh_again_changes_nothing(
    engine: Engine,
) -> None:
    _enrolled(engine, "PB-7")
    key = _pull(engine, 1, "open", T0 + HOUR)
    assert _review(engine, 21, key, T0 + 2 * HOUR, "changes_requested")
    assert not _review(engine, 21, key, T0 + 2 * HOUR, "changes_requested")
    assert _refresh(engine, "PB-7") == 1
    assert _refresh(engine, "PB-7") == 0
    assert _row(engine)[3] == 1
    with db.transaction(engine) as session:
        assert session.scalar(select(func.count()).select_from(ExperimentReview)) == 1


def test_links_are_found_by_the_bot_s_spelling_and_others_are_skipped(engine: Engine) -> None:
    # Enrolled as the bot spelled it; the PR names the issue with another case.
    _enrolled(engine, "Acme/API#40")
    _pull(engine, 1, "merged", T0 + HOUR, tickets=("Acme/API#40", "acme/api#41", "PB-9"))
    # Only the enrolled ticket is in the experiment: the others are skipped.
    assert _refresh(engine, "acme/api#40", "acme/api#41", "PB-9") == 1
    assert _row(engine, "acme/api#40") == ("merged", T0 + HOUR, False, 0)
    assert _refresh(engine) == 0


# Through the bot: deliveries refresh the outcome in the transaction that stores the PR.


def _review_payload(opened: dict, review_id: int, state: str, at: str) -> dict:
    payload = pull_request_review(opened, "Please handle the retry case.")
    payload["review"].update(id=review_id, state=state, submitted_at=at)
    return payload


def test_pull_request_and_review_deliveries_keep_the_outcome(loop: Loop) -> None:
    _enrolled(loop.engine, "CTMS-4337")
    opened = pull_request("opened", at="2026-11-03T10:00:00Z")
    loop.github_event("pull_request.opened", opened)
    loop.process()
    assert _row(loop.engine, "CTMS-4337")[0] == "open"
    review = _review_payload(opened, 901, "changes_requested", "2026-11-03T11:00:00Z")
    loop.github_event("pull_request_review.submitted", review)
    loop.github_event("pull_request_review.submitted", review)  # redelivered
    loop.github_event(
        "pull_request_review.submitted",
        _review_payload(opened, 902, "approved", "2026-11-03T12:00:00Z"),
    )
    loop.process()
    assert _row(loop.engine, "CTMS-4337") == ("open", None, False, 1)
    assert last_delivery(loop.engine, "pull_request_review").status == "ignored"
    merged = pull_request("closed", merged=True, at="2026-11-04T10:00:00Z")
    loop.github_event("pull_request.closed", merged)
    loop.github_event("pull_request.closed", merged)  # redelivered
    loop.process()
    assert _row(loop.engine, "CTMS-4337") == (
        "merged",
        datetime(2026, 11, 4, 10, tzinfo=UTC),
        False,
        1,
    )


def test_a_review_payload_without_id_state_or_time_still_validates() -> None:
    from bot import payloads

    event = payloads.ReviewEvent.model_validate(
        {"pull_request": {"number": 3}, "repository": {"full_name": "a/b"}, "review": {}}
    )
    assert event.review is not None
    assert (event.review.id, event.review.state, event.review.submitted_at) == (None, None, None)
    real = payloads.ReviewEvent.model_validate(
        {
            "pull_request": {"number": 3},
            "repository": {"full_name": "a/b"},
            "review": {
                "id": 80,
                "state": "changes_requested",
                "submitted_at": "2026-11-03T11:00:00Z",
                "body": None,
            },
        }
    )
    assert real.review is not None
    assert real.review.submitted_at == datetime(2026, 11, 3, 11, tzinfo=UTC)

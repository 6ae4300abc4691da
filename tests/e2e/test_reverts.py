"""Reverts end to end: signed deliveries through the endpoint and worker, fake GitHub, the CLI."""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import Engine, func, select

from playbook.db import transaction
from playbook.lessons import browse, lifecycle
from playbook.models import PullRequest, Revision, SideEffect
from tests.loop_harness import REPO, Loop
from tests.payloads import pull_request
from tests.support import last_delivery

# N, the PR a revert undoes: it cites pb-1, is about CTMS-4337 (pb-2 was learned from that
# ticket) and teaches a lesson in its Lessons section (captured as pb-3).
N_BODY = """Fixes CTMS-4337. Applied [pb-1].

## Lessons
- Stripe retries webhooks for days; dedupe on the event id before touching the order.
"""
N_HEAD, N_MERGE = "a1" * 20, "b2" * 20
MERGED_N = "2026-11-03T10:00:00Z"
MERGED_M = "2026-11-05T10:00:00Z"
MERGED_R = "2026-11-07T10:00:00Z"
REVERT_TITLE = 'Revert "CTMS-4337: dedupe webhook retries"'  # as GitHub's button titles it
OUTSIDER = {"login": "drive-by", "type": "User"}


def key(number: int) -> str:
    return f"{REPO}#{number}"


def seed(engine: Engine) -> None:
    with transaction(engine) as session:
        for text, ticket in (
            ("Idempotency keys on every payment call", "CTMS-1"),
            ("The retry handler must not open a second transaction", "CTMS-4337"),
        ):
            lifecycle.add(session, text, learned_from=ticket, scope="CTMS", actor="seed")


def merged(
    number: int,
    at: str,
    *,
    body: str = "",
    title: str = REVERT_TITLE,
    branch: str = "hotfix/checkout",
    head_sha: str | None = None,
    merge_sha: str | None = None,
    merged_by: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A ``pull_request.closed`` delivery of PR ``number`` merged ``at``."""
    payload = pull_request(
        "closed", number=number, title=title, body=body, merged=True, at=at, branch=branch
    )
    pr = payload["pull_request"]
    pr["head"]["sha"] = head_sha or f"{number:040x}"
    pr["merge_commit_sha"] = merge_sha or f"{number + 1000:040x}"
    pr["merged_by"] = merged_by
    return payload


def n_merged() -> dict[str, Any]:
    """PR 2's merge, as GitHub delivers it."""
    return merged(
        2,
        MERGED_N,
        body=N_BODY,
        title="CTMS-4337: dedupe webhook retries",
        branch="feature/retries",
        head_sha=N_HEAD,
        merge_sha=N_MERGE,
    )


def merge_n(loop: Loop) -> None:
    """PR 2 merged: pb-1 cited in merged work, pb-3 captured and approved."""
    seed(loop.engine)
    loop.github_event("pull_request.closed", n_merged())
    loop.process()
    with transaction(loop.engine) as session:
        assert lifecycle.get(session, "pb-3").status == "active"
        assert lifecycle.get(session, "pb-1").cites_success == 1


def shown(cli, bullet_id: str) -> dict[str, Any]:
    result = cli("show", bullet_id, "--json")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def pull(engine: Engine, number: int) -> tuple[str | None, str | None, str]:
    """(reverts, reverted_by, state) of a stored PR."""
    with transaction(engine) as session:
        row = session.get(PullRequest, key(number))
        assert row is not None
        return row.reverts, row.reverted_by, row.state


def assert_reverted_by(cli, engine: Engine, revert: int) -> None:
    """PR 2 reverted by ``revert``: its lessons deprecated, its cite a failure."""
    reason = f"reverted ({key(revert)})"
    for bullet_id in ("pb-2", "pb-3"):
        data = shown(cli, bullet_id)
        assert (data["status"], data["demoted_reason"]) == ("deprecated", reason)
        last = data["history"][-1]
        assert last["action"] == "deprecate"
        assert f"{key(revert)} reverted {key(2)}" in last["reason"]
    cited = shown(cli, "pb-1")
    assert (cited["cites"], cited["cites_success"], cited["cites_failure"]) == (1, 0, 1)
    assert pull(engine, 2)[1] == key(revert)
    assert pull(engine, revert)[0] == key(2)


def assert_untouched(cli, engine: Engine) -> None:
    for bullet_id in ("pb-2", "pb-3"):
        data = shown(cli, bullet_id)
        assert (data["status"], data["demoted_reason"]) == ("active", None)
    cited = shown(cli, "pb-1")
    assert (cited["cites_success"], cited["cites_failure"]) == (1, 0)
    assert pull(engine, 2)[1] is None


def revisions(engine: Engine) -> int:
    with transaction(engine) as session:
        return session.scalar(select(func.count()).select_from(Revision)) or 0


class Lines(logging.Handler):
    """The messages logged to a logger, as text."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


# --- each signal -------------------------------------------------------------------------------


def test_the_revert_button_pr_demotes_the_lessons_and_fails_the_cites(loop: Loop, cli) -> None:
    merge_n(loop)
    body = f"Reverts {REPO}#2\n\nThe dedupe broke checkout for saved cards."
    opened = pull_request("opened", number=3, title=REVERT_TITLE, body=body, at=MERGED_M)
    loop.github_event("pull_request.opened", opened)
    loop.process()
    assert pull(loop.engine, 3)[0] == key(2)  # linked as soon as it is opened
    assert_untouched(cli, loop.engine)  # an open revert undoes nothing yet
    # The CLI replaces the root logger's handlers (caplog's too): listen on the handler's own.
    lines = Lines()
    logger = logging.getLogger("bot.handlers.pull_requests")
    logger.addHandler(lines)
    try:
        loop.github_event("pull_request.closed", merged(3, MERGED_M, body=body), delivery="m-1")
        loop.process()
    finally:
        logger.removeHandler(lines)
    assert_reverted_by(cli, loop.engine, 3)
    assert f"{key(2)} reverted by {key(3)}: demoted ['pb-3', 'pb-2'], restored none, 1 cites" in (
        "\n".join(lines.messages)
    )
    text = cli("show", "pb-2").stdout
    assert "demoted:" in text and f"(reverted ({key(3)}))" in text
    assert f"by playbook-bot ({key(3)} reverted {key(2)})" in text
    with transaction(loop.engine) as session:
        [cite] = [m for m in browse.timeline(session, "pb-1") if m.kind == "rejected"]
    assert (cite.pull_request, cite.reason) == (key(2), f"{key(2)} was reverted by {key(3)}")
    # No commits read: the body said what it reverts.
    with transaction(loop.engine) as session:
        reads = session.scalars(select(SideEffect).where(SideEffect.action == "read_commits"))
        assert [effect.ticket_key for effect in reads] == [key(2)]

    # GitHub retries, a redelivery days later, the same merge again under a new id.
    before = revisions(loop.engine)
    loop.github_event("pull_request.closed", merged(3, MERGED_M, body=body), delivery="m-1")
    loop.github_event("pull_request.closed", merged(3, MERGED_M, body=body), delivery="m-2")
    loop.github_event("pull_request.closed", n_merged())
    loop.process()
    assert revisions(loop.engine) == before
    assert_reverted_by(cli, loop.engine, 3)


def test_the_branch_of_the_revert_button_links_it(loop: Loop, cli) -> None:
    merge_n(loop)
    loop.github_event("pull_request.closed", merged(3, MERGED_M, branch="revert-2-feature/retries"))
    loop.process()
    assert_reverted_by(cli, loop.engine, 3)


@pytest.mark.parametrize("sha", [N_MERGE, N_HEAD, N_MERGE[:12].upper()])
def test_a_commit_that_reverts_the_merged_commits_links_it(loop: Loop, cli, sha: str) -> None:
    merge_n(loop)
    loop.github.add_pull(REPO, 3, title="Back out the dedupe")
    loop.github.pull_commits[(REPO, 3)] = [
        "Fix a typo",
        f'Revert "CTMS-4337: dedupe webhook retries"\n\nThis reverts commit {sha}.',
    ]
    loop.github_event("pull_request.closed", merged(3, MERGED_M, title="Back out the dedupe"))
    loop.process()
    assert_reverted_by(cli, loop.engine, 3)
    loop.github_event("pull_request.closed", merged(3, MERGED_M, title="Back out the dedupe"))
    loop.process()
    # The commits are read once per merged PR, not once per delivery.
    assert len(loop.github.calls("GET", f"/repos/{REPO}/pulls/3/commits")) == 1


@pytest.mark.parametrize(
    ("body", "branch", "commit"),
    [
        ("Reverts other-org/Hello-World#2", "hotfix", None),  # the same number, another repo
        ("This partly reverts the retry change of #2; a revert of it may follow.", "fix", None),
        ("", "reverting-2-retries", None),
        ("", "hotfix", f"This reverts commit {'c3' * 20}."),  # a commit of no stored PR
        ("", "hotfix", "Revert the retry dedupe from #2"),
    ],
)
def test_what_only_looks_like_a_revert_links_nothing(
    loop: Loop, cli, body: str, branch: str, commit: str | None
) -> None:
    merge_n(loop)
    loop.github.add_pull(REPO, 3, title="Checkout fix")
    loop.github.pull_commits[(REPO, 3)] = [commit] if commit else []
    loop.github_event(
        "pull_request.closed", merged(3, MERGED_M, body=body, branch=branch, title="Checkout fix")
    )
    loop.process()
    assert pull(loop.engine, 3)[0] is None
    assert_untouched(cli, loop.engine)


# --- trust -------------------------------------------------------------------------------------


def test_a_revert_closed_unmerged_does_nothing(loop: Loop, cli) -> None:
    merge_n(loop)
    payload = pull_request(
        "closed", number=3, title=REVERT_TITLE, body=f"Reverts {REPO}#2", at=MERGED_M
    )
    loop.github_event("pull_request.closed", payload)
    loop.process()
    assert pull(loop.engine, 3) == (key(2), None, "closed")
    assert_untouched(cli, loop.engine)


def test_a_revert_merged_by_someone_without_write_access_is_ignored(loop: Loop, cli) -> None:
    merge_n(loop)
    loop.github.permissions[(REPO, "drive-by")] = "read"
    loop.github_event(
        "pull_request.closed", merged(3, MERGED_M, body="Reverts #2", merged_by=OUTSIDER)
    )
    loop.process()
    assert_untouched(cli, loop.engine)
    row = last_delivery(loop.engine, "pull_request")
    assert row.status == "ignored"
    assert (
        f"{key(3)} reverts {key(2)}, but drive-by has no write access to {REPO}; "
        "outcome not applied"
    ) in (row.reason or "")


def test_a_persons_change_after_the_revert_wins(loop: Loop, cli) -> None:
    merge_n(loop)
    # The revert merged on the 5th; its delivery is processed late. Meanwhile, a maintainer
    # looked at pb-2 and decided it stays (a deprecate and a restore, after the revert).
    assert cli("deprecate", "pb-2", "--reason", "checking it").exit_code == 0
    assert cli("restore", "pb-2").exit_code == 0
    loop.github_event("pull_request.closed", merged(3, MERGED_M, body="Reverts #2"))
    loop.process()
    assert shown(cli, "pb-2")["status"] == "active"
    assert shown(cli, "pb-3")["demoted_reason"] == f"reverted ({key(3)})"
    assert shown(cli, "pb-1")["cites_failure"] == 1


# --- reverting the revert, order, backfill ------------------------------------------------------


def test_reverting_the_revert_restores_and_reverting_that_demotes_again(loop: Loop, cli) -> None:
    merge_n(loop)
    loop.github_event("pull_request.closed", merged(3, MERGED_M, body=f"Reverts {REPO}#2"))
    loop.process()
    assert_reverted_by(cli, loop.engine, 3)
    revert_of_revert = merged(
        4,
        MERGED_R,
        title=f'Revert "{REVERT_TITLE}"',
        body=f"Reverts {REPO}#3",
        branch="revert-3-hotfix/checkout",
    )
    loop.github_event("pull_request.closed", revert_of_revert, delivery="r-1")
    loop.process()
    for bullet_id in ("pb-2", "pb-3"):
        data = shown(cli, bullet_id)
        assert (data["status"], data["demoted_reason"]) == ("active", None)
        last = data["history"][-1]
        assert last["action"] == "restore"
        assert f"{key(3)}, which reverted {key(2)}, was reverted by {key(4)}" in last["reason"]
    cited = shown(cli, "pb-1")
    assert (cited["cites"], cited["cites_success"], cited["cites_failure"]) == (1, 1, 0)
    assert pull(loop.engine, 2)[1] is None
    assert pull(loop.engine, 3)[1] == key(4)

    before = revisions(loop.engine)
    loop.github_event("pull_request.closed", revert_of_revert, delivery="r-1")
    loop.github_event("pull_request.closed", revert_of_revert)
    loop.github_event("pull_request.closed", merged(3, MERGED_M, body=f"Reverts {REPO}#2"))
    loop.process()
    assert revisions(loop.engine) == before

    # And a revert of that: #3 is in force again, so #2 is reverted by it again.
    loop.github_event(
        "pull_request.closed", merged(5, "2026-11-09T10:00:00Z", body=f"Reverts {REPO}#4")
    )
    loop.process()
    assert_reverted_by(cli, loop.engine, 3)


def test_a_revert_delivered_before_the_merge_it_reverts(loop: Loop, cli) -> None:
    seed(loop.engine)
    loop.github_event("pull_request.closed", merged(3, MERGED_M, body="Reverts #2"))
    loop.process()
    assert pull(loop.engine, 3) == (key(2), None, "merged")
    loop.github_event("pull_request.closed", n_merged())
    loop.process()
    # pb-3 was captured and approved by #2's merge, then demoted by the revert in force.
    assert_reverted_by(cli, loop.engine, 3)


def _iso(value: datetime) -> str:
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def test_backfill_applies_a_revert_found_in_the_commits(loop: Loop, cli) -> None:
    from bot.backfill import backfill
    from bot.worker import Services

    seed(loop.engine)
    now = datetime.now(UTC)
    n_at, m_at = _iso(now - timedelta(days=5)), _iso(now - timedelta(days=2))
    loop.github.add_pull(
        REPO,
        2,
        title="CTMS-4337: dedupe webhook retries",
        body=N_BODY,
        state="closed",
        merged=True,
        merged_at=n_at,
        closed_at=n_at,
        updated_at=_iso(now - timedelta(days=1)),  # listed before the revert: order by merge
        head_ref="feature/retries",
        head_sha=N_HEAD,
        merge_commit_sha=N_MERGE,
    )
    loop.github.add_pull(
        REPO,
        3,
        title="Back out the dedupe",
        state="closed",
        merged=True,
        merged_at=m_at,
        closed_at=m_at,
        updated_at=m_at,
        merged_by="Codertocat",
    )
    loop.github.pull_commits[(REPO, 3)] = [f"This reverts commit {N_MERGE}."]
    services = Services(engine=loop.engine, settings=loop.settings)
    report = backfill(services, REPO, timedelta(days=90))
    assert (report.seen, report.merged, report.ignored) == (2, 2, [])
    assert_reverted_by(cli, loop.engine, 3)
    before = revisions(loop.engine)
    backfill(services, REPO, timedelta(days=90))
    assert revisions(loop.engine) == before
    assert_reverted_by(cli, loop.engine, 3)


def test_backfill_ignores_a_revert_merged_without_write_access(loop: Loop, cli) -> None:
    from bot.backfill import backfill
    from bot.worker import Services

    merge_n(loop)
    at = _iso(datetime.now(UTC) - timedelta(days=1))
    loop.github.add_pull(
        REPO,
        3,
        title=REVERT_TITLE,
        body="Reverts #2",
        state="closed",
        merged=True,
        merged_at=at,
        closed_at=at,
        updated_at=at,
        merged_by="drive-by",
    )
    services = Services(engine=loop.engine, settings=loop.settings)
    report = backfill(services, REPO, timedelta(days=90))
    assert report.ignored == [
        f"{key(3)} reverts {key(2)}, but drive-by has no write access to {REPO}; "
        "outcome not applied"
    ]
    assert_untouched(cli, loop.engine)


def test_the_work_landing_again_brings_back_the_tickets_lessons(loop: Loop, cli) -> None:
    merge_n(loop)
    loop.github_event("pull_request.closed", merged(3, MERGED_M, body="Reverts #2"))
    loop.github_event(
        "pull_request.closed",
        merged(5, MERGED_R, title="CTMS-4337: dedupe webhook retries, take two"),
    )
    loop.process()
    assert (shown(cli, "pb-2")["status"], shown(cli, "pb-2")["demoted_reason"]) == ("active", None)
    # pb-3 came from #2's Lessons section: #2 stays reverted, so its lesson stays out.
    assert shown(cli, "pb-3")["demoted_reason"] == f"reverted ({key(3)})"

"""`/playbook supersede pb-N by pb-M [reason]` in a comment, and `/lesson` naming a similar one."""

from __future__ import annotations

from playbook.db import transaction
from playbook.lessons import lifecycle
from playbook.lessons.capture import commands_in
from tests.loop_harness import REPO, Loop
from tests.payloads import issue_comment

OLD = "Pin the v1 payments client to 1.4 because 1.5 breaks refunds"
NEW = "Use the v2 payments client because it handles refunds and retries"
SIMILAR = "Pin the v2 payments client to 2.0 because 1.5 breaks refunds and retries"


def test_the_supersede_command_reads_its_ids_with_or_without_by() -> None:
    [with_by] = commands_in("/playbook supersede pb-3 by PB-9 the v2 client, finally")
    assert (with_by.verb, with_by.bullet_id, with_by.by) == ("supersede", "pb-3", "pb-9")
    assert with_by.reason == "the v2 client, finally"
    [without] = commands_in("/playbook supersede pb-3 pb-9")
    assert (without.by, without.reason) == ("pb-9", None)
    for bad in ("/playbook supersede pb-3", "/playbook supersede pb-3 by", "/playbook supersede x"):
        [command] = commands_in(bad)
        assert command.problem and "supersede pb-N by pb-M" in command.problem, bad


def _comment(loop: Loop, body: str, user: str) -> str:
    """Post ``body`` as a new comment by ``user`` on issue 1; the bot's reply."""
    before = len(loop.github.comments_on(REPO, 1))
    payload = issue_comment(body, user)
    payload["comment"]["id"] = 7000 + before  # a new comment each time: each is answered once
    loop.github_event("issue_comment.created", payload)
    loop.process()
    replies = loop.github.comments_on(REPO, 1)
    assert len(replies) == before + 1
    return replies[-1]["body"].split("\n<!--")[0]  # without the bot's hidden marker


def test_a_maintainer_supersedes_by_comment_and_an_outsider_cannot(loop: Loop) -> None:
    with transaction(loop.engine) as session:
        # In the repository's scope, where its comments' lessons go and are compared.
        old = lifecycle.add(session, OLD, learned_from="PAY-1", actor="t", scope=REPO).bullet.id
        new = lifecycle.add(session, NEW, learned_from="PAY-2", actor="t", scope=REPO).bullet.id
    loop.github.add_issue(REPO, 1, "Refunds fail on 1.5")
    loop.github.permissions[(REPO, "maintainer")] = "write"
    loop.github.permissions[(REPO, "drive-by")] = "read"

    refused = _comment(loop, f"/playbook supersede {old} by {new}", "drive-by")
    assert "Only people with write access" in refused
    reply = _comment(loop, f"/playbook supersede {old} by {new} v2 fixes refunds", "maintainer")
    assert reply == f"{old} is now superseded by {new}."
    with transaction(loop.engine) as session:
        bullet = lifecycle.get(session, old)
        assert (bullet.status, bullet.superseded_by) == ("superseded", new)
        assert lifecycle.history(session, old)[-1].actor == "maintainer (comment)"
    cycle = _comment(loop, f"/playbook supersede {new} by {old}", "maintainer")
    assert cycle.startswith("Nothing changed:") and "cycle" in cycle
    assert _comment(loop, f"/playbook restore {old}", "maintainer") == f"{old} is now active."

    captured = _comment(loop, f"/lesson {SIMILAR}", "maintainer")
    assert f"much like {old}" in captured and f"/playbook supersede {old} by pb-3" in captured

"""NUL (U+0000) in a signed delivery, on both databases: a ticket key holding one (or any key no
tracker sends) is refused naming the field; NUL in a title, a body, a label or a comment is
accepted and processed without it. Never a 500, never a traceback in the log."""

from __future__ import annotations

import copy
import logging
from typing import Any

import pytest
from sqlalchemy import Engine, select

from playbook.db import transaction
from playbook.lessons import lifecycle
from playbook.models import Bullet, Delivery, Revision, SideEffect
from tests.loop_harness import REPO, Loop
from tests.payloads import fixture, issue_comment

NUL = "\u0000"


def _stored(engine: Engine) -> list[Delivery]:
    with transaction(engine) as session:
        rows = list(session.scalars(select(Delivery).order_by(Delivery.id)))
        session.expunge_all()
        return rows


def _no_traceback(caplog: pytest.LogCaptureFixture) -> None:
    for record in caplog.records:
        assert record.exc_info is None, record.getMessage()
        assert record.levelno < logging.ERROR, record.getMessage()
        assert "Traceback" not in record.getMessage()


def _jira(key: Any = "CTMS-4337", **fields: Any) -> dict[str, Any]:
    payload = copy.deepcopy(fixture("jira.issue_created"))
    payload["issue"]["key"] = key
    payload["issue"]["fields"].update(fields)
    return payload


BAD_JIRA_KEYS = [
    f"CTMS-4337{NUL}",
    f"CTMS{NUL}-4337",
    NUL,
    "ctms-4337",  # Jira project keys are upper case
    "CTMS-0",
    "CTMS-04337",
    "CTMS-4337 ",
    " CTMS-4337",
    "CTMS-4337\n",
    "../../CTMS-1",
    "CTMS-1/comment",
    "CTMS-4337\u202e",
    "\uff23\uff34\uff2d\uff33-4337",  # full-width letters
    "C" * 5_000 + "-1",
    "CTMS-" + "9" * 5_000,
    "",
    4337,
    True,
    ["CTMS-4337"],
]


@pytest.mark.parametrize("key", BAD_JIRA_KEYS, ids=range(len(BAD_JIRA_KEYS)))
def test_a_jira_key_no_tracker_sends_is_refused_naming_the_field(
    loop: Loop, caplog: pytest.LogCaptureFixture, key: Any
) -> None:
    caplog.set_level(logging.INFO)
    answer = loop.jira_event(_jira(key))
    assert answer.status_code == 400, answer.get_data(as_text=True)
    message = answer.get_json()["message"]
    assert message.startswith("issue.key must be a Jira issue key"), message
    assert NUL not in answer.get_data(as_text=True)
    assert _stored(loop.engine) == []
    _no_traceback(caplog)


@pytest.mark.parametrize(
    "name",
    [f"{REPO}{NUL}", f"Codertocat{NUL}/Hello-World", "Codertocat/../x", "Codertocat/Hello World"],
)
def test_a_github_repository_no_tracker_sends_is_refused_naming_the_field(
    loop: Loop, caplog: pytest.LogCaptureFixture, name: str
) -> None:
    caplog.set_level(logging.INFO)
    opened = fixture("issues.opened")
    opened["repository"]["full_name"] = name
    answer = loop.github_event("issues.opened", opened)
    assert answer.status_code == 400, answer.get_data(as_text=True)
    assert answer.get_json()["message"].startswith("repository.full_name must be")
    assert _stored(loop.engine) == []
    _no_traceback(caplog)


def test_nul_in_a_jira_summary_description_and_labels_is_processed_without_it(
    loop: Loop, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    with transaction(loop.engine) as session:
        lifecycle.add(
            session,
            "Payment webhook retries must be idempotent: dedupe on the event id",
            learned_from="CTMS-4001",
            scope="CTMS",
            actor="seed",
        )
    loop.jira.add_issue("CTMS-4337", "Checkout times out when the payment webhook retries")
    payload = _jira(
        summary=f"Checkout times out when the payment{NUL} webhook retries",
        description=f"Stripe retries{NUL} the payment webhook{NUL}",
        labels=[f"payments{NUL}", NUL, "webhooks"],
    )
    answer = loop.jira_event(payload)
    assert answer.status_code == 202, answer.get_data(as_text=True)
    [row] = _stored(loop.engine)
    assert row.ticket_key == "CTMS-4337"

    loop.process()
    [row] = _stored(loop.engine)
    assert (row.status, row.last_error) == ("done", None)
    [post] = loop.jira.calls("POST", "/rest/api/2/issue/CTMS-4337/comment")
    assert NUL not in post.json["body"] and "\\[pb-1\\]" in post.json["body"]
    _no_traceback(caplog)


def test_nul_in_a_github_title_body_label_and_command_is_processed_without_it(
    loop: Loop, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    loop.github.add_issue(REPO, 1, "Spelling error in the README file")
    loop.github.permissions[(REPO, "maintainer")] = "write"
    opened = fixture("issues.opened")
    opened["issue"]["title"] = f"Spelling error{NUL} in the README file"
    opened["issue"]["body"] = f"The README says{NUL} recieve."
    opened["issue"]["labels"] = [{"name": f"docs{NUL}", "id": 1}, {"name": NUL, "id": 2}]
    assert loop.github_event("issues.opened", opened).status_code == 202
    command = issue_comment(f"/lesson Run codespell{NUL} in CI before merging docs", "maintainer")
    assert loop.github_event("issue_comment.created", command).status_code == 202

    loop.process()
    rows = _stored(loop.engine)
    assert [(row.status, row.last_error) for row in rows] == [("done", None)] * 2
    with transaction(loop.engine) as session:
        [lesson] = session.scalars(select(Bullet)).all()
        assert lesson.text == "Run codespell in CI before merging docs"
        after = session.scalars(select(Revision.after)).all()
        effects = session.scalars(select(SideEffect.ticket_key)).all()
    assert NUL not in repr(after) and all(NUL not in (key or "") for key in effects)
    [reply] = loop.github.comments_on(REPO, 1)
    assert "Captured pb-1" in reply["body"]
    _no_traceback(caplog)

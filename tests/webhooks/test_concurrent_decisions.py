"""Twenty concurrent decisions on one consolidation, through a real server: exactly one is 200,
the others 409, and each member's history tells the change once."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

import pytest
from sqlalchemy import Engine, func, select

from playbook.consolidation import store
from playbook.db import transaction
from playbook.models import Bullet, Consolidation, Revision
from tests.racing import all_read_first, race
from tests.support import serving
from tests.webhooks.consolidating import open_consolidation

N = 20
MAINTAINER = "race-maintainer"
TEXTS = (
    "Retry the upload with an idempotency key when the storage API times out",
    "Storage calls that hang need a second attempt; reuse the same key each time",
)


def _post(url: str, body: dict[str, Any] | None = None) -> tuple[int, dict[str, Any]]:
    request = urllib.request.Request(
        url,
        data=json.dumps(body or {}).encode(),
        method="POST",
        headers={"Authorization": f"Bearer {MAINTAINER}", "Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=120) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read() or b"{}")


def _count(engine: Engine, bullet_id: str, action: str) -> int:
    with transaction(engine) as session:
        return session.scalar(
            select(func.count())
            .select_from(Revision)
            .where(Revision.bullet_id == bullet_id, Revision.action == action)
        )


def _decide_at_once(
    engine: Engine, shared_app: Any, monkeypatch: pytest.MonkeyPatch, number: int, verb: str
) -> list[tuple[int, dict[str, Any]]]:
    app = shared_app(api_token=MAINTAINER)
    with serving(app) as base, all_read_first(monkeypatch, engine, store, "get", N):
        return race(N, lambda _i: _post(f"{base}/api/v1/consolidations/{number}/{verb}"))


def test_twenty_concurrent_undos_restore_each_member_once(
    engine: Engine, shared_app: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    number, members = open_consolidation(engine, TEXTS)
    with transaction(engine) as session:
        merged = store.accept(session, number, actor="t").merged_id
    answers = _decide_at_once(engine, shared_app, monkeypatch, number, "undo")

    codes = sorted(code for code, _ in answers)
    assert codes == [200] + [409] * (N - 1), answers
    for code, body in answers:
        if code == 409:
            assert body["detail"], body  # says what happened, like any refused transition
    for member in members:
        assert _count(engine, member, "restore") == 1
    assert _count(engine, merged or "", "archive") == 1
    with transaction(engine) as session:
        assert session.get(Consolidation, number).status == "undone"  # type: ignore[union-attr]
        statuses = {session.get(Bullet, m).status for m in members}  # type: ignore[union-attr]
        assert statuses == {"active"}


def test_twenty_concurrent_accepts_make_one_merged_lesson(
    engine: Engine, shared_app: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    number, members = open_consolidation(engine, TEXTS)
    answers = _decide_at_once(engine, shared_app, monkeypatch, number, "accept")

    codes = sorted(code for code, _ in answers)
    assert codes == [200] + [409] * (N - 1), answers
    with transaction(engine) as session:
        consolidations = session.scalars(select(Consolidation.merged_id)).all()
        merged = session.scalars(select(Bullet.id).where(Bullet.source == "consolidation")).all()
    assert len(merged) == 1 and consolidations == merged
    for member in members:
        assert _count(engine, member, "supersede") == 1


def test_an_undo_racing_a_reject_or_accept_racing_reject_leaves_one_decision(
    engine: Engine, shared_app: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    number, members = open_consolidation(engine, TEXTS)
    app = shared_app(api_token=MAINTAINER)
    verbs = ["accept", "reject"] * (N // 2)
    with serving(app) as base, all_read_first(monkeypatch, engine, store, "get", N):
        answers = race(N, lambda i: _post(f"{base}/api/v1/consolidations/{number}/{verbs[i]}"))

    won = [verbs[i] for i, (code, _) in enumerate(answers) if code == 200]
    assert len(won) == 1 and sorted(code for code, _ in answers)[1:] == [409] * (N - 1), answers
    with transaction(engine) as session:
        row = session.get(Consolidation, number)
        assert (
            row is not None and row.status == {"accept": "accepted", "reject": "rejected"}[won[0]]
        )
    superseded = 1 if won == ["accept"] else 0
    for member in members:
        assert _count(engine, member, "supersede") == superseded


@pytest.mark.parametrize(
    ("verb", "start"), [("restore", "deprecated"), ("approve", "proposed"), ("deprecate", "active")]
)
def test_twenty_concurrent_changes_of_a_lesson_through_the_api_change_it_once(
    engine: Engine, shared_app: Any, monkeypatch: pytest.MonkeyPatch, verb: str, start: str
) -> None:
    from playbook.lessons import lifecycle

    with transaction(engine) as session:
        added = lifecycle.add(
            session,
            TEXTS[0],
            learned_from="CTMS-1",
            actor="t",
            status="proposed" if start == "proposed" else "active",
        )
        bullet_id = added.bullet.id
        if start == "deprecated":
            lifecycle.deprecate(session, bullet_id, reason="flaky", actor="t")
    app = shared_app(api_token=MAINTAINER)
    with serving(app) as base, all_read_first(monkeypatch, engine, lifecycle, "get", N):
        url = f"{base}/api/v1/lessons/{bullet_id}/{verb}"
        answers = race(N, lambda _i: _post(url, {"reason": "outdated"}))

    changed = [body for code, body in answers if code == 200 and body["changed"]]
    others = sorted(code for code, body in answers if not (code == 200 and body["changed"]))
    assert len(changed) == 1, answers
    # The others read the old status and lost (409), or came after the winner (200, unchanged).
    assert set(others) <= {200, 409} and len(others) == N - 1, answers
    if engine.dialect.name == "postgresql":
        assert others == [409] * (N - 1), answers
    assert _count(engine, bullet_id, verb) == 1


def test_a_models_draft_arriving_during_an_accept_never_becomes_a_text_nobody_accepted(
    engine: Engine,
) -> None:
    if engine.dialect.name != "postgresql":
        pytest.skip("SQLite opens each write transaction with BEGIN IMMEDIATE: no stale read")
    from sqlalchemy.orm import Session

    from playbook.errors import Conflict

    number, _ = open_consolidation(engine, TEXTS)
    model_text = "Retry storage calls that time out, reusing one idempotency key for every attempt"
    person = Session(engine)
    try:
        # The accept's own read of the proposal (held, as accept holds it between its read
        # and its write), then the model's draft lands before the accept writes.
        read = store.get(person, number)
        shown = read.draft
        with transaction(engine) as model:  # the model's draft lands meanwhile
            store.set_draft(model, number, model_text, source="model", model="m")
        with pytest.raises(Conflict, match="draft changed"):
            store.accept(person, number, actor="boss")
        person.rollback()
    finally:
        person.close()
    with transaction(engine) as session:
        row = session.get(Consolidation, number)
        assert row is not None and (row.status, row.draft) == ("open", model_text)
        assert shown != model_text

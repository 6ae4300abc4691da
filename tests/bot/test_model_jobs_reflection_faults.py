"""Reflection jobs that fail: the model limited, down, talking nonsense or over budget, GitHub
failing the reads. Each ends as the inbox says (deferred, retried, dead), the close's outcome
untouched, and nothing is proposed twice."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

import pytest
from sqlalchemy import Engine, select

from bot.services import Services
from bot.worker import Worker
from playbook import clock
from playbook.db import transaction
from playbook.models import Bullet, Delivery
from tests.bot.reflection_world import (
    AUTHORS,
    BOTS,
    JOB,
    LINE,
    PR,
    READER,
    REVIEW,
    a_reviewed_pull,
    feedback_sent,
    job,
    lessons,
    logged,
    model_mode,
    model_server,
    model_worker,
    outcome_stands,
    proposed,
    reflect,
    said,
)
from tests.e2e.test_review_proposals import close, on_github, seed
from tests.fakes.model import FakeModel, invalid_json, rate_limited, server_error
from tests.fakes.server import Failure
from tests.loop_harness import REPO, Loop


@pytest.fixture
def model() -> Iterator[FakeModel]:
    with model_server() as server:
        yield server


@pytest.fixture
def loop(engine: Engine, database_url: str, model: FakeModel) -> Iterator[Loop]:
    with model_mode(engine, database_url, model) as running:
        yield running


def test_a_429_defers_the_job_and_it_proposes_once_the_wait_is_over(
    loop: Loop, model: FakeModel
) -> None:
    a_reviewed_pull(loop)
    close(loop)
    model.queue(
        rate_limited("30"), lessons(("Close HTTP sessions in a finally block.", "finally block"))
    )
    now = clock.now()

    with clock.frozen(now):
        assert model_worker(loop).run_once() == 1
        waiting = job(loop.engine)
        assert (waiting.status, waiting.attempts, waiting.error_kind) == (
            "failed",
            0,
            "rate_limited",
        )
        assert waiting.next_attempt_at == now + timedelta(seconds=30)
        assert "rate_limited" in (waiting.last_error or "") or "429" in (waiting.last_error or "")
        # Not due yet: the model's worker takes only the rating job meanwhile.
        assert model_worker(loop).run_once() == 1
        assert len(model.chat_requests()) == 1
        assert model_worker(loop).run_once() == 0
    assert proposed(loop.engine) == []
    outcome_stands(loop.engine)

    with clock.frozen(now + timedelta(seconds=31)):
        reflect(loop)
    assert [p["text"] for p in proposed(loop.engine)] == ["Close HTTP sessions in a finally block."]
    assert job(loop.engine).status == "done"


def test_nonsense_twice_is_dead_with_the_reason_and_a_replay_proposes_once(
    loop: Loop, model: FakeModel, cli
) -> None:
    a_reviewed_pull(loop)
    close(loop)
    model.queue(invalid_json(), invalid_json())

    reflect(loop)

    dead = job(loop.engine)
    assert dead.status == "dead"
    assert "bad_answer" in (dead.last_error or "") or "not usable" in (dead.last_error or "")
    assert "deliveries replay" in (dead.last_error or "")
    assert len(model.chat_requests()) == 2  # the answer, and its one retry
    assert proposed(loop.engine) == []
    outcome_stands(loop.engine)
    shown = cli("deliveries", "show", JOB)
    assert shown.exit_code == 0 and "dead" in shown.output, shown.output

    answer = lessons(("Close HTTP sessions in a finally block.", "finally block"))
    model.queue(answer)
    assert cli("deliveries", "replay", JOB).exit_code == 0
    reflect(loop)
    assert [p["id"] for p in proposed(loop.engine)] == ["pb-2"]
    assert job(loop.engine).status == "done"

    # Replayed after it succeeded: the model may be asked again, nothing is proposed twice.
    model.queue(answer)
    assert cli("deliveries", "replay", JOB).exit_code == 0
    lines = reflect(loop)
    assert [p["id"] for p in proposed(loop.engine)] == ["pb-2"]
    assert said(PR, lines).endswith("(1 skipped: 1 in the playbook)")
    outcome_stands(loop.engine)


def test_a_model_that_is_down_is_retried_with_backoff(loop: Loop, model: FakeModel) -> None:
    a_reviewed_pull(loop)
    close(loop)
    model.queue(
        server_error(503), lessons(("Close HTTP sessions in a finally block.", "finally block"))
    )
    now = clock.now()

    with clock.frozen(now):
        reflect(loop)
        failed = job(loop.engine)
        assert (failed.status, failed.attempts, failed.error_kind) == ("failed", 1, "transient")
        assert failed.next_attempt_at > now
    assert proposed(loop.engine) == []
    outcome_stands(loop.engine)

    with clock.frozen(failed.next_attempt_at + timedelta(seconds=1)):
        # The rating job (nothing to rate) and then the retried reflection.
        while model_worker(loop).run_once():
            pass
    assert [p["text"] for p in proposed(loop.engine)] == ["Close HTTP sessions in a finally block."]
    assert job(loop.engine).status == "done"
    assert len(model.chat_requests()) == 2


def test_a_github_read_failing_in_the_job_is_retried_before_the_model_is_asked(
    loop: Loop, model: FakeModel
) -> None:
    review, _ = a_reviewed_pull(loop)
    close(loop)
    path = f"/repos/{REPO}/pulls/2/reviews"
    loop.github.failures.append(Failure("GET", path, 502, times=3))
    model.queue(lessons(("Use the v2 client here; v1 drops retries.", "it drops retries")))
    now = clock.now()

    with clock.frozen(now):
        reflect(loop)
    failed = job(loop.engine)
    assert (failed.status, failed.error_kind) == ("failed", "transient")
    assert "502" in (failed.last_error or "")
    assert model.chat_requests() == []  # not asked about half the feedback
    outcome_stands(loop.engine)

    loop.github.failures.clear()
    with clock.frozen(failed.next_attempt_at + timedelta(seconds=1)):
        reflect(loop)
    [asked] = model.chat_requests()
    assert REVIEW in feedback_sent(asked) and LINE in feedback_sent(asked)
    assert [p["source_url"] for p in proposed(loop.engine)] == [review["html_url"]]
    assert job(loop.engine).status == "done"


def test_over_the_daily_budget_the_job_waits_for_the_next_utc_day(
    engine: Engine, database_url: str, model: FakeModel
) -> None:
    with model_mode(engine, database_url, model, PLAYBOOK_MODEL_DAILY_CALLS=0) as loop:
        a_reviewed_pull(loop)
        close(loop)
        model.queue(lessons(("Close HTTP sessions in a finally block.", "finally block")))
        now = clock.now()

        with clock.frozen(now):
            reflect(loop)
        waiting = job(loop.engine)
        assert (waiting.status, waiting.attempts, waiting.error_kind) == (
            "failed",
            0,
            "rate_limited",
        )
        tomorrow = (now + timedelta(days=1)).replace(hour=0, minute=0, second=0, microsecond=0)
        assert waiting.next_attempt_at == tomorrow
        assert "next UTC day" in (waiting.last_error or "")
        assert model.chat_requests() == []
        assert proposed(loop.engine) == []
        outcome_stands(loop.engine)


def test_no_feedback_by_a_writer_asks_the_model_nothing(loop: Loop, model: FakeModel) -> None:
    seed(loop.engine)
    on_github(loop)
    loop.github.permissions[(REPO, "drive-by")] = "read"
    loop.github.add_review(REPO, 2, AUTHORS, "coding-agent")
    loop.github.add_comment(REPO, 2, BOTS, "ci-helper[bot]")
    loop.github.add_review_comment(REPO, 2, READER, "drive-by")
    close(loop)

    reflect(loop)

    assert model.chat_requests() == []
    ignored = job(loop.engine)
    assert ignored.status == "ignored"
    assert "no review feedback" in (ignored.reason or "")
    assert proposed(loop.engine) == []


def test_a_redelivered_close_queues_no_second_reflection(loop: Loop, model: FakeModel) -> None:
    a_reviewed_pull(loop)
    close(loop, delivery="close-1")
    close(loop, delivery="close-1")
    close(loop, delivery="close-2")
    with transaction(loop.engine) as session:
        jobs = session.scalars(select(Delivery.delivery_id).where(Delivery.source == "playbook"))
        assert sorted(jobs) == [f"rate:{PR}", JOB]


def test_a_job_queued_before_the_model_was_unset_gives_the_feedback_to_the_heuristic(
    loop: Loop, model: FakeModel
) -> None:
    review, line = a_reviewed_pull(loop)
    close(loop)
    # The server restarts without a model while the job waits.
    unset = {"model_base_url": None, "model_name": None, "capture_from_reviews": "heuristic"}
    services = Services(engine=loop.engine, settings=loop.settings.model_copy(update=unset))

    with logged() as lines:
        while Worker(services, name="model-worker", queue="model").run_once():
            pass

    assert model.chat_requests() == []
    assert job(loop.engine).status == "done"
    with transaction(loop.engine) as session:
        found = session.scalars(
            select(Bullet).where(Bullet.source == "review").order_by(Bullet.number)
        ).all()
        assert [(b.text, b.status, b.source_url) for b in found] == [
            (REVIEW, "proposed", review["html_url"]),
            (
                "Close the HTTP session in a finally block, we leak sockets otherwise.",
                "proposed",
                line["html_url"],
            ),
        ]
    assert (
        f"{PR}: 2 lessons proposed from review feedback by alice "
        "(no model endpoint is set: by the heuristic)"
    ) in lines

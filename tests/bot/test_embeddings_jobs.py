"""Lessons' embeddings: queued with the change, computed by the model worker, faults classified."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import Engine

from bot import embeddings
from bot.config import Settings
from playbook import clock
from playbook.db import transaction
from playbook.lessons import lifecycle
from tests.bot.embeddings_world import (
    EMBED_MODEL,
    MODEL_KEY,
    World,
    hook,
    jobs,
    stale,
    start_world,
    stored,
    usage,
)
from tests.fakes.model import rate_limited, server_error, slow, wrong_dimension

BROKER = "Reconnect the subscriber when the broker changes"
LOCKS = "Never hold a database lock across an HTTP call"


@pytest.fixture
def world(engine: Engine, settings: Settings) -> Iterator[World]:
    running = start_world(engine, settings)
    yield running
    running.stop()


def test_a_created_lesson_is_embedded_by_the_worker_job_not_by_the_write(world: World) -> None:
    lesson = world.add(BROKER)
    # The write only queued the job, in its own transaction: nothing was asked yet.
    assert world.model.embedding_requests() == []
    assert [(j.source, j.status, j.delivery_id) for j in jobs(world.engine)] == [
        ("playbook", "pending", embeddings.embed_id(lesson, _hash(BROKER)))
    ]
    assert stale(world.engine) == [lesson]

    before = _embedding_calls()
    assert world.run_jobs() == 1
    assert world.model.embedded_texts() == [BROKER]
    assert _embedding_calls() - before == 1  # in the model metrics, under its own purpose
    model, dim, values = stored(world.engine, lesson) or ("", 0, [])
    assert (model, dim) == (EMBED_MODEL, 64)
    assert values == pytest.approx(world.model.vector_of(BROKER), abs=1e-6)
    assert stale(world.engine) == []
    assert [j.status for j in jobs(world.engine)] == ["done"]
    # The request asked for floats (every compatible server speaks them), with our key.
    request = world.model.calls("POST", "/v1/embeddings")[0]
    assert request.json["encoding_format"] == "float"
    assert request.headers["Authorization"] == f"Bearer {MODEL_KEY}"
    # Counted as the endpoint's use, as chat calls are.
    calls, tokens, failures = usage(world.engine)[0]
    assert (calls, failures) == (1, 0) and tokens > 0


def test_an_edited_lesson_is_stale_until_its_new_job_runs(world: World) -> None:
    lesson = world.add(BROKER)
    world.run_jobs()
    edited = BROKER + " and resubscribe to every topic"
    world.edit(lesson, edited)

    assert stale(world.engine) == [lesson]
    # Until the job runs, the search knows the old vector no longer fits the text.
    found = world.search("subscriber broker topic")
    assert found.rerank == "fallback"
    assert f"no lesson has an embedding by {EMBED_MODEL}" in (found.rerank_reason or "")

    assert world.run_jobs() == 1
    # The lesson's texts, each once (the search asked about its own query besides).
    assert world.model.embedded_texts() == [BROKER, "subscriber broker topic", edited]
    assert stale(world.engine) == []
    assert stored(world.engine, lesson)[2] == pytest.approx(  # type: ignore[index]
        world.model.vector_of(edited), abs=1e-6
    )
    assert world.search("subscriber broker topic").rerank == "used"


def test_only_active_lessons_are_queued_and_a_job_skips_what_changed_since(world: World) -> None:
    proposed = world.add(LOCKS, status="proposed")
    assert jobs(world.engine) == []  # a proposal is not searched: nothing to embed

    lesson = world.add(BROKER)
    with transaction(world.engine) as session:
        lifecycle.archive(session, lesson, reason="obsolete", actor="t")
    world.run_jobs()
    assert world.model.embedding_requests() == []
    job = jobs(world.engine)[0]
    assert job.status == "ignored"
    assert job.reason == f"{lesson} is archived: only active lessons are embedded"

    # Approved, it is queued; edited twice before the worker runs, only the last text is asked.
    with transaction(world.engine) as session:
        lifecycle.approve(session, proposed, actor="t")
    world.edit(proposed, LOCKS + " (a payment provider's, above all)")
    world.run_jobs()
    assert world.model.embedded_texts() == [LOCKS + " (a payment provider's, above all)"]
    reasons = [j.reason for j in jobs(world.engine) if j.status == "ignored"]
    assert f"{proposed} changed since: the job of its new text embeds it" in reasons
    assert stale(world.engine) == []


def test_a_text_that_comes_back_after_an_edit_is_embedded_again(world: World) -> None:
    lesson = world.add(BROKER)
    world.run_jobs()
    world.edit(lesson, LOCKS)
    world.run_jobs()
    world.edit(lesson, BROKER)  # its first text again: that job finished long ago
    assert stale(world.engine) == [lesson]
    world.run_jobs()
    assert world.model.embedded_texts() == [BROKER, LOCKS, BROKER]
    assert stale(world.engine) == []


def test_a_slow_or_failing_endpoint_retries_the_job_with_backoff(
    engine: Engine, settings: Settings
) -> None:
    world = start_world(engine, settings, model_timeout_seconds=0.5)
    try:
        world.add(BROKER)
        world.model.queue_embeddings(slow(3), server_error(503))
        world.run_jobs()
        job = jobs(world.engine)[0]
        assert (job.status, job.error_kind, job.attempts) == ("failed", "transient", 1)
        assert "embedding endpoint: timeout: no answer after 0.5s" in (job.last_error or "")

        _later(minutes=5)
        world.run_jobs()
        job = jobs(world.engine)[0]
        assert (job.status, job.error_kind, job.attempts) == ("failed", "transient", 2)
        assert "HTTP 503" in (job.last_error or "")

        _later(minutes=30)
        world.run_jobs()
        assert jobs(world.engine)[0].status == "done"
        assert stale(world.engine) == []
        # Three calls, two failed: summed over UTC days, since the retries 35 minutes on may fall
        # on the next day (the test failed when run after 23:25 UTC).
        days = usage(world.engine)
        assert (sum(d[0] for d in days), sum(d[2] for d in days)) == (3, 2)
    finally:
        world.stop()


def test_a_rate_limited_job_waits_for_retry_after_without_counting_an_attempt(
    world: World,
) -> None:
    world.add(BROKER)
    world.model.queue_embeddings(rate_limited("120"))
    now = datetime.now(UTC)
    with clock.frozen(now):
        world.run_jobs()
        job = jobs(world.engine)[0]
        assert (job.status, job.error_kind, job.attempts) == ("failed", "rate_limited", 0)
        assert "HTTP 429, retry after 120s" in (job.last_error or "")
        assert job.next_attempt_at == now + timedelta(seconds=120)
    with clock.frozen(now + timedelta(seconds=119)):
        assert world.run_jobs() == 0  # it waits
    with clock.frozen(now + timedelta(seconds=121)):
        assert world.run_jobs() == 1
    assert jobs(world.engine)[0].status == "done"
    assert len(world.model.embedding_requests()) == 2


@pytest.mark.parametrize(
    ("change", "fix"),
    [
        ({"model_api_key": "sk-wrong-Zx8Cv6Bn4Mq2Wd0Fr9Gt7Hy5"}, "check PLAYBOOK_MODEL_API_KEY"),
        (
            {"embedding_model": "no-such-embedder"},
            "set PLAYBOOK_EMBEDDING_MODEL to an embedding model the endpoint serves",
        ),
    ],
)
def test_a_refused_key_or_unknown_model_ends_the_job_dead_naming_the_setting(
    engine: Engine, settings: Settings, change: dict[str, str], fix: str, caplog
) -> None:
    from pydantic import SecretStr

    values = {k: SecretStr(v) if k == "model_api_key" else v for k, v in change.items()}
    world = start_world(engine, settings, **values)
    try:
        caplog.set_level(logging.INFO)
        world.add(BROKER)
        world.run_jobs()
        job = jobs(world.engine)[0]
        assert (job.status, job.error_kind, job.attempts) == ("dead", "permanent", 1)
        assert fix in (job.last_error or "")
        assert "deliveries replay" in (job.last_error or "")
        # The wrong key the server quotes back is never stored nor logged.
        assert "Zx8Cv6Bn4Mq2Wd0Fr9Gt7Hy5" not in (job.last_error or "") + caplog.text
        assert stale(world.engine) != []
    finally:
        world.stop()


def test_an_answer_of_another_dimension_is_refused_not_mixed_in(world: World) -> None:
    first = world.add(BROKER)
    world.run_jobs()
    second = world.add(LOCKS)
    world.model.queue_embeddings(wrong_dimension(3))
    world.run_jobs()
    job = jobs(world.engine)[-1]
    assert (job.status, job.error_kind) == ("dead", "permanent")
    assert "answered 3 dimensions, the lessons it embedded before have 64" in (job.last_error or "")
    assert "PLAYBOOK_EMBEDDING_MODEL" in (job.last_error or "")
    assert stored(world.engine, second) is None
    assert stored(world.engine, first) is not None


def test_a_broken_answer_is_dead_and_the_job_queue_keeps_going(world: World) -> None:
    from tests.fakes.model import broken_body

    world.add(BROKER)
    world.model.queue_embeddings(broken_body())
    world.run_jobs()
    job = jobs(world.engine)[0]
    assert job.status == "dead"
    assert "not embeddings" in (job.last_error or "")


def test_services_without_an_embedding_model_leave_the_search_hook_off(
    world: World, engine: Engine, settings: Settings
) -> None:
    assert hook() is not None
    from bot.services import Services

    Services(engine=engine, settings=settings)
    assert hook() is None
    world.add(BROKER)  # the listener stays registered, but queues nothing with embeddings off
    assert jobs(engine) == []


def test_the_listener_is_registered_once_however_often_services_are_built(world: World) -> None:
    for _ in range(3):
        world.services  # noqa: B018
    assert lifecycle.change_listeners.count(embeddings._queue_on_change) == 1


def _hash(text: str) -> str:
    from playbook.search import vectors

    return vectors.text_hash(text)


def _embedding_calls() -> float:
    from prometheus_client import REGISTRY

    labels = {"purpose": "embedding", "outcome": "ok"}
    return REGISTRY.get_sample_value("playbook_model_calls_total", labels) or 0.0


def _later(**delta: float) -> None:
    shift = timedelta(**delta)
    clock.set_clock(lambda: datetime.now(UTC) + shift)


def test_the_schedule_queues_lessons_from_before_the_model_soon_after_a_start(
    engine: Engine, settings: Settings
) -> None:
    from bot.scheduler import JOBS, start
    from bot.services import Services

    Services(engine=engine, settings=settings)  # no embedding model: writes queue nothing
    with transaction(engine) as session:
        for text in (BROKER, LOCKS):
            lifecycle.add(session, text, learned_from="CTMS-1", actor="t")
    world = start_world(engine, settings, embed_backfill_schedule="10 2 * * *")
    try:
        for chosen, scheduled in ((settings, False), (world.settings, True)):
            scheduler = start(engine, chosen, holder="test")
            assert scheduler is not None
            try:
                job = scheduler.get_job("embed_backfill")
                assert (job is not None) == scheduled
                if job is not None:
                    assert "hour='2', minute='10'" in str(job.trigger)
                    # The first run comes minutes after the start, not at the next 02:10.
                    assert job.next_run_time - datetime.now(UTC) < timedelta(minutes=6)
            finally:
                scheduler.shutdown(wait=False)

        body = JOBS["embed_backfill"][1]
        body(engine, settings)
        assert jobs(engine) == []
        body(engine, world.settings)
        body(engine, world.settings)  # waiting jobs are not queued twice
        assert [j.status for j in jobs(engine)] == ["pending", "pending"]
        world.run_jobs()
        assert stale(engine) == []
    finally:
        world.stop()

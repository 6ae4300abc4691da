"""With a model: each new proposal gets one merge job on the model's worker, which writes the
merged draft when the answer holds up, and leaves the longest member when it does not."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from prometheus_client import REGISTRY
from sqlalchemy import Engine

from bot import consolidate
from bot.config import Settings
from bot.services import Services
from bot.worker import Worker
from tests.bot.consolidation_world import (
    JITTER,
    MERGED,
    RECONNECT,
    SCOPE,
    merge_jobs,
    proposals,
    seed,
)
from tests.fakes.model import FakeModel, server_error

MODEL = "test-model"
KEY = "sk-model-" + "Q7wE9rT1yU3iO5pA7sD9fG1h"


@pytest.fixture
def model(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeModel]:
    """The fake model, set for the CLI too, and a 2,000-character budget."""
    fake = FakeModel(models=(MODEL,), api_key=KEY)
    fake.start()
    values = {
        "PLAYBOOK_MODEL_BASE_URL": fake.base_url,
        "PLAYBOOK_MODEL": MODEL,
        "PLAYBOOK_MODEL_API_KEY": KEY,
        "PLAYBOOK_MODEL_TIMEOUT_SECONDS": "5",
        "PLAYBOOK_CONTEXT_BUDGET": "2000",
    }
    for name, value in values.items():
        monkeypatch.setenv(name, value)
    yield fake
    fake.stop()


def services(engine: Engine, database_url: str, model: FakeModel | None) -> Services:
    """The bot's services on the test database, with ``model`` as its endpoint (or none)."""
    values: dict[str, Any] = {"PLAYBOOK_CONTEXT_BUDGET": 2000}
    if model is not None:
        values.update(
            PLAYBOOK_MODEL_BASE_URL=model.base_url,
            PLAYBOOK_MODEL=MODEL,
            PLAYBOOK_MODEL_API_KEY=KEY,
            PLAYBOOK_MODEL_TIMEOUT_SECONDS=5,
        )
    settings = Settings(_env_file=None, PLAYBOOK_DATABASE_URL=database_url, **values)
    return Services(engine=engine, settings=settings)


@pytest.fixture
def bot(engine: Engine, database_url: str, model: FakeModel) -> Services:
    """The bot's services on the test database, with the fake model as its endpoint."""
    return services(engine, database_url, model)


def run_model_jobs(bot: Services) -> int:
    """The model's worker, until no job is due; how many it claimed."""
    worker = Worker(bot, name="model-worker", queue="model")
    total = 0
    while claimed := worker.run_once():
        total += claimed
    return total


def merge(text: str, *replaces: str) -> dict[str, Any]:
    return {"text": text, "replaces": list(replaces), "kept": ["reconnect with backoff"]}


def job(cli: Any, consolidation_id: int) -> dict[str, Any]:
    """The merge job as `deliveries show` shows it."""
    result = cli("deliveries", "show", f"merge:{consolidation_id}")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_the_model_worker_writes_the_merged_draft(
    cli: Any, engine: Engine, bot: Services, model: FakeModel
) -> None:
    seed(engine)
    calls = {"purpose": "merge", "outcome": "ok"}
    before = REGISTRY.get_sample_value("playbook_model_calls_total", calls) or 0.0
    model.queue(merge(MERGED, "pb-1", "pb-2"))
    out = cli("consolidate")
    assert out.exit_code == 0, out.output
    assert "1 merge job queued: the model worker writes their drafts" in out.output
    number = proposals(engine)[0]["id"]
    assert merge_jobs(engine) == [(f"merge:{number}", "pending")]
    assert model.chat_requests() == []  # the run only queues; the model's worker asks
    assert run_model_jobs(bot) == 1
    [proposal] = proposals(engine)
    assert (proposal["draft"], proposal["draft_source"], proposal["model"]) == (
        MERGED,
        "model",
        MODEL,
    )
    assert proposal["dropped_terms"] == {}  # every member's words are in the merge
    # Counted as the model's merge calls, not "other".
    assert REGISTRY.get_sample_value("playbook_model_calls_total", calls) == before + 1
    assert merge_jobs(engine) == [(f"merge:{number}", "done")]
    # What the model was sent: both members, by id, between the markers.
    [request] = model.chat_requests()
    user = request["messages"][-1]["content"]
    block = user.split("<lessons>", 1)[1].split("</lessons>", 1)[0]
    assert f"[pb-1]\n{RECONNECT}" in block and f"[pb-2]\n{JITTER}" in block
    # Another run proposes nothing new and asks nothing more.
    assert consolidate.run(bot).proposals == 0
    assert run_model_jobs(bot) == 0 and len(model.chat_requests()) == 1
    shown = cli("consolidations", "show", str(number))
    assert f"draft by the model {MODEL}" in shown.output


def test_a_dry_run_with_a_model_queues_nothing(
    engine: Engine, bot: Services, model: FakeModel
) -> None:
    seed(engine)
    report = consolidate.run(bot, dry_run=True)
    assert report.proposals == 1 and proposals(engine) == [] and merge_jobs(engine) == []


def test_an_answer_leaving_out_a_member_is_refused_and_the_draft_stays(
    cli: Any, engine: Engine, bot: Services, model: FakeModel
) -> None:
    seed(engine)
    model.queue(merge("Reconnect the subscriber with exponential backoff", "pb-1"))
    consolidate.run(bot)
    run_model_jobs(bot)
    [proposal] = proposals(engine)
    assert (proposal["draft"], proposal["draft_source"]) == (RECONNECT, "longest")
    shown = job(cli, proposal["id"])
    assert shown["status"] == "ignored"
    assert "refused: the answer's `replaces` leaves out pb-2" in shown["reason"]
    assert "the draft stays the longest member" in shown["reason"]
    assert len(model.chat_requests()) == 1  # not asked again


def test_a_merge_that_drops_a_members_key_terms_is_flagged(
    cli: Any, engine: Engine, bot: Services, model: FakeModel
) -> None:
    seed(engine)
    lossy = (
        "After a broker failover, reconnect the subscriber with exponential backoff and log "
        "the new broker address"
    )
    model.queue(merge(lossy, "pb-2", "PB-1"))
    consolidate.run(bot)
    run_model_jobs(bot)
    [proposal] = proposals(engine)
    assert (proposal["draft"], proposal["draft_source"]) == (lossy, "model")
    assert proposal["dropped_terms"] == {"pb-2": ["jitter"]}
    shown = cli("consolidations", "show", str(proposal["id"]))
    assert "key terms of a member the draft drops" in shown.output
    assert "  pb-2: jitter" in shown.output


def test_a_proposal_decided_before_its_job_runs_is_left_as_decided(
    cli: Any, engine: Engine, bot: Services, model: FakeModel
) -> None:
    seed(engine)
    consolidate.run(bot)
    number = proposals(engine)[0]["id"]
    assert cli("consolidations", "reject", str(number)).exit_code == 0
    run_model_jobs(bot)
    assert model.chat_requests() == []
    shown = job(cli, number)
    assert shown["status"] == "ignored"
    assert f"consolidation {number} is rejected" in shown["reason"]
    assert proposals(engine)[0]["draft_source"] == "longest"


def test_a_model_that_is_down_retries_the_job_and_keeps_the_draft(
    cli: Any, engine: Engine, bot: Services, model: FakeModel
) -> None:
    seed(engine)
    model.queue(server_error(503), server_error(503), server_error(503))
    consolidate.run(bot)
    run_model_jobs(bot)
    assert proposals(engine)[0]["draft_source"] == "longest"
    assert (
        job(cli, proposals(engine)[0]["id"])["status"] == "failed"
    )  # transient: the inbox tries again later


def test_a_run_without_a_model_queues_no_merge_job(engine: Engine, database_url: str) -> None:
    seed(engine)
    report = consolidate.run(services(engine, database_url, None))
    [scope] = report.scopes
    assert (scope.scope, len(scope.proposals), scope.queued) == (SCOPE, 1, 0)
    assert merge_jobs(engine) == []

"""The command line with an embedding model: add, worker, `embed --backfill`, `search --explain`."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from bot import embeddings
from tests.bot.embeddings_world import EMBED_MODEL, MODEL_KEY
from tests.fakes.model import FakeModel, slow

TICKET = "the consumer hangs after failover"
BROKER = "Reconnect the subscriber when the broker changes"
GROUP = "A consumer group rebalances slowly when a member hangs"
NEAR = [1.0] + [0.0] * 63


@pytest.fixture
def model() -> Iterator[FakeModel]:
    fake = FakeModel(models=(EMBED_MODEL,), api_key=MODEL_KEY)
    fake.start()
    yield fake
    fake.stop()
    embeddings.uninstall()


@pytest.fixture
def configured(model: FakeModel, monkeypatch: pytest.MonkeyPatch) -> Callable[..., None]:
    """Point the CLI's settings at the fake endpoint's embedding model (no chat model)."""

    def configure(**extra: str) -> None:
        monkeypatch.setenv("PLAYBOOK_MODEL_BASE_URL", model.base_url)
        monkeypatch.setenv("PLAYBOOK_MODEL_API_KEY", MODEL_KEY)
        monkeypatch.setenv("PLAYBOOK_EMBEDDING_MODEL", EMBED_MODEL)
        monkeypatch.delenv("PLAYBOOK_MODEL", raising=False)
        for name, value in extra.items():
            monkeypatch.setenv(name, value)

    return configure


def add(cli: Any, text: str) -> str:
    result = cli("add", text, "--learned-from", "CTMS-1")
    assert result.exit_code == 0, result.output
    return result.stdout.strip()


def test_search_explain_shows_similarity_text_rank_and_the_blend(
    cli: Any, model: FakeModel, configured: Callable[..., None]
) -> None:
    configured()
    model.plant(TICKET, NEAR)
    model.plant(BROKER, NEAR)
    broker, group = add(cli, BROKER), add(cli, GROUP)
    # The adds queued the jobs; the worker runs the model queue with no chat model set.
    worked = cli("worker", "--once")
    assert worked.stdout.strip() == "processed 2 deliveries"
    assert sorted(model.embedded_texts()) == sorted([BROKER, GROUP])

    table = cli("search", TICKET, "--explain")
    assert table.exit_code == 0, table.output
    lines = table.stdout.splitlines()
    assert lines[0] == "rerank: used (text rank blended with the ticket's embedding similarity)"
    at = next(i for i, line in enumerate(lines) if f" {broker} " in line)
    assert (
        lines[at + 2]
        .strip()
        .startswith("similarity 1.000, no text rank (found by similarity), blended 0.300 -> rank ")
    )
    at = next(i for i, line in enumerate(lines) if f" {group} " in line)
    assert "text rank 1, blended " in lines[at + 2] and lines[at + 2].endswith("-> rank 1")

    answer = json.loads(cli("search", TICKET, "--explain", "--json").stdout)
    assert (answer["rerank"], answer["rerank_reason"]) == ("used", None)
    hits = {hit["id"]: hit for hit in answer["results"]}
    assert hits[broker]["similarity"] == pytest.approx(1.0, abs=1e-5)
    assert hits[broker]["text_rank"] is None
    assert hits[broker]["blended"] == pytest.approx(0.3, abs=1e-5)
    assert hits[group]["text_rank"] == 1


def test_search_explain_says_why_it_fell_back_in_text_and_json(
    cli: Any, model: FakeModel, configured: Callable[..., None]
) -> None:
    configured(PLAYBOOK_EMBEDDING_TIMEOUT_SECONDS="0.5")
    group = add(cli, GROUP)
    cli("worker", "--once")
    model.embed_always(slow(10))

    table = cli("search", TICKET, "--explain")
    first = table.stdout.splitlines()[0]
    assert first.startswith("rerank: fell back to the text ranking: the embedding endpoint failed")
    assert "timeout" in first and "PLAYBOOK_EMBEDDING_TIMEOUT_SECONDS" in first
    assert f" {group} " in table.stdout

    answer = json.loads(cli("search", TICKET, "--json").stdout)
    assert answer["rerank"] == "fallback"
    assert "timeout" in answer["rerank_reason"]
    assert [hit["id"] for hit in answer["results"]] == [group]


def test_embed_backfill_queues_the_lessons_from_before_the_model_was_set(
    cli: Any, model: FakeModel, configured: Callable[..., None]
) -> None:
    broker, group = add(cli, BROKER), add(cli, GROUP)  # no embedding model yet: nothing queued
    configured()
    dry = cli("embed", "--backfill", "--dry-run")
    assert dry.exit_code == 0, dry.output
    assert dry.stdout.splitlines()[0] == (
        f"would queue 2 embedding jobs for {EMBED_MODEL}: 2 active lessons not embedded or stale"
    )
    assert model.embedding_requests() == []

    queued = cli("embed", "--backfill")
    assert queued.stdout.splitlines()[0] == (
        f"queued 2 embedding jobs for {EMBED_MODEL}: 2 active lessons not embedded or stale"
    )
    dry = cli("embed", "--backfill", "--dry-run")
    assert dry.stdout.splitlines()[0] == (
        f"would queue 0 embedding jobs for {EMBED_MODEL}: 2 active lessons not embedded or stale "
        "(2 already waiting for the worker)"
    )
    again = json.loads(cli("embed", "--backfill", "--json").stdout)
    assert again == {
        "model": EMBED_MODEL,
        "dry_run": False,
        "stale": [broker, group],
        "queued": [],
        "already_queued": [broker, group],
    }
    assert model.embedding_requests() == []  # only queued

    assert cli("worker", "--once").stdout.strip() == "processed 2 deliveries"
    done = cli("embed", "--backfill")
    assert done.stdout.strip() == (
        f"queued 0 embedding jobs for {EMBED_MODEL}: 0 active lessons not embedded or stale"
    )


def test_embed_backfill_without_an_embedding_model_is_a_one_line_error(cli: Any) -> None:
    result = cli("embed", "--backfill")
    assert result.exit_code == 2
    assert result.output.strip().splitlines() == [
        "error: no embedding model is set: set PLAYBOOK_EMBEDDING_MODEL and PLAYBOOK_MODEL_BASE_URL"
    ]
    plain = cli("embed")
    assert plain.exit_code == 2 and "--backfill" in plain.output

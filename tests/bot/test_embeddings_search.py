"""The search with an embedding endpoint: found by meaning, and in time by text when it fails."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest
from pydantic import SecretStr
from sqlalchemy import Engine

from bot import embeddings
from bot.config import Settings
from tests.bot.embeddings_world import EMBED_MODEL, MODEL_KEY, World, start_world
from tests.fakes.model import rate_limited, server_error, slow, wrong_dimension

# The ticket and the lesson that answers it share no word; the others share some.
TICKET = "the consumer hangs after failover"
BROKER = "Reconnect the subscriber when the broker changes"
GROUP = "A consumer group rebalances slowly when a member hangs"
LOCKS = "Never hold a database lock across an HTTP call"
# One direction for the ticket and the lesson about it, as a real model would place them.
NEAR = [1.0] + [0.0] * 63


@pytest.fixture
def world(engine: Engine, settings: Settings) -> Iterator[World]:
    running = start_world(engine, settings, embedding_timeout_seconds=0.5)
    yield running
    running.stop()


def embedded(world: World, *texts: str) -> list[str]:
    """Lessons created and embedded by the worker; their ids."""
    ids = [world.add(text) for text in texts]
    world.run_jobs()
    return ids


def test_a_lesson_sharing_no_word_with_the_ticket_is_found_by_meaning(world: World) -> None:
    world.model.plant(TICKET, NEAR)
    world.model.plant(BROKER, NEAR)
    broker, group, _ = embedded(world, BROKER, GROUP, LOCKS)

    found = world.search(TICKET)
    assert (found.rerank, found.rerank_reason) == ("used", None)
    hits = {hit.bullet_id: hit for hit in found.hits}
    assert broker in hits  # no word in common: the text ranking alone never shows it
    assert hits[broker].text_rank is None
    assert hits[broker].similarity == pytest.approx(1.0, abs=1e-5)
    assert hits[group].text_rank == 1
    # The ticket's text (summary and description) is what the endpoint was asked about.
    assert world.model.embedded_texts()[-1] == TICKET

    # The same search without the endpoint: text ranking, the broker lesson nowhere.
    world.model.embed_always(server_error())
    alone = world.search(TICKET)
    assert alone.rerank == "fallback"
    assert [hit.bullet_id for hit in alone.hits] == [group]


def test_a_slow_endpoint_answers_with_the_text_ranking_in_time_and_says_so(world: World) -> None:
    _, group, _ = embedded(world, BROKER, GROUP, LOCKS)
    world.search(TICKET)  # the client is made on the first search: time the ones after
    world.model.embed_always(slow(10))

    found = world.search(TICKET)

    assert found.rerank == "fallback"
    assert [hit.bullet_id for hit in found.hits] == [group]
    reason = found.rerank_reason or ""
    # The client gave up after the 0.5 s it was given (its own message says how long it
    # waited), not when the endpoint answered 10 s later (that answer holds no vector: another
    # reason). How long the search then takes is bench/semantic_speed.py's to measure.
    assert "timeout: no answer after 0.5s" in reason
    assert "PLAYBOOK_EMBEDDING_TIMEOUT_SECONDS" in reason
    assert "\n" not in reason


def test_an_endpoint_that_is_down_answers_with_the_text_ranking(
    engine: Engine, settings: Settings
) -> None:
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    world = start_world(engine, settings)
    try:
        _, group, _ = embedded(world, BROKER, GROUP, LOCKS)
        down = start_world(engine, settings, model_base_url=f"http://127.0.0.1:{port}/v1")
        found = down.search(TICKET)
        assert found.rerank == "fallback"
        assert [hit.bullet_id for hit in found.hits] == [group]
        assert f"cannot connect to http://127.0.0.1:{port}/v1" in (found.rerank_reason or "")
        down.model.stop()
    finally:
        world.stop()


@pytest.mark.parametrize(
    ("fault", "said"),
    [
        (wrong_dimension(3), "the query embedding has 3 dimensions, the stored embeddings 64"),
        (rate_limited("30"), "HTTP 429"),
        (server_error(502), "HTTP 502"),
    ],
)
def test_a_faulty_answer_falls_back_to_the_text_ranking_with_the_reason(
    world: World, fault, said: str
) -> None:
    _, group, _ = embedded(world, BROKER, GROUP, LOCKS)
    world.model.queue_embeddings(fault)
    found = world.search(TICKET)
    assert found.rerank == "fallback"
    assert said in (found.rerank_reason or "")
    assert [hit.bullet_id for hit in found.hits] == [group]
    # The next search, the endpoint well again, reranks.
    assert world.search(TICKET).rerank == "used"


def test_a_refused_key_is_a_reason_without_the_key(
    world: World, engine: Engine, settings: Settings
) -> None:
    embedded(world, BROKER, GROUP)
    wrong = "sk-wrong-" + "Zx8Cv6Bn4Mq2Wd0Fr9Gt7Hy5"
    refused = start_world(
        engine, settings, model_api_key=SecretStr(wrong), model_base_url=world.model.base_url
    )
    try:
        found = refused.search(TICKET)
        assert found.rerank == "fallback"
        reason = found.rerank_reason or ""
        assert "HTTP 401, the API key was refused" in reason
        assert wrong not in reason and MODEL_KEY not in reason
    finally:
        refused.stop()


def test_without_any_embedding_yet_the_search_says_why_it_ranked_by_text(world: World) -> None:
    world.add(GROUP)  # queued, not yet run
    found = world.search(TICKET)
    assert found.rerank == "fallback"
    assert found.rerank_reason == f"no lesson has an embedding by {EMBED_MODEL} yet; ranked by text"


def test_a_credential_in_the_ticket_never_reaches_the_endpoint(world: World) -> None:
    from tests.secret_samples import SAMPLES

    embedded(world, BROKER, GROUP)
    token = next(sample.value for sample in SAMPLES if sample.kind == "github_token")
    found = world.search(f"{TICKET}\nthe consumer logs in with {token} and hangs")
    assert found.rerank == "used"
    asked = world.model.embedded_texts()[-1]
    assert token not in asked
    assert asked == f"{TICKET}\nthe consumer logs in with [credential removed] and hangs"


def test_the_agent_api_of_an_app_with_an_embedding_model_reranks(world: World) -> None:
    from webhooks import create_app

    world.model.plant(TICKET, NEAR)
    world.model.plant(BROKER, NEAR)
    broker, group = embedded(world, BROKER, GROUP)
    settings = world.settings.model_copy(update={"api_token": "maintainer-token"})
    embeddings.uninstall()  # the app, not the worker's services, must turn the rerank on
    client = create_app(settings, engine=world.engine).test_client()
    answer = client.get(
        "/api/v1/search",
        query_string={"q": TICKET},
        headers={"Authorization": "Bearer maintainer-token"},
    ).get_json()
    assert (answer["rerank"], answer["rerank_reason"]) == ("used", None)
    lessons = {lesson["id"]: lesson for lesson in answer["lessons"]}
    assert lessons[broker]["text_rank"] is None
    assert lessons[broker]["similarity"] == pytest.approx(1.0, abs=1e-5)
    assert lessons[group]["text_rank"] == 1

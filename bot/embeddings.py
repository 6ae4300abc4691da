"""Embeddings from the model endpoint: lessons embedded by worker jobs, the ticket's at search.

A lesson's embedding is computed by a model job (source "playbook", event "model.embed", one
delivery id per lesson and text), queued in the writer's transaction when an active lesson is
created or changed, never inside a request. The ticket's embedding is one call with a short
timeout and no retry; whatever goes wrong, the search gets no vector and a one-line reason,
and ranks by text alone.
"""

from __future__ import annotations

import json
import logging
import math
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from bot import metrics, model_client
from bot.model_client import Answer, ModelError, Usage
from playbook import db
from playbook.deliveries import inbox
from playbook.lessons import lifecycle, secrets
from playbook.search import rerank, retrieval, vectors

if TYPE_CHECKING:
    from openai import OpenAI
    from sqlalchemy import Engine
    from sqlalchemy.orm import Session

    from bot.config import Settings
    from playbook.models import Bullet

log = logging.getLogger(__name__)

SOURCE = inbox.JOB_SOURCE
EMBED = f"{inbox.MODEL_EVENT_PREFIX}embed"
PURPOSE = "embedding"
# Lessons a backfill queues per transaction.
BACKFILL_BATCH = 500
# A ticket's text sent for its embedding is cut here: small embedding models read a few
# hundred tokens (MiniLM 256, about 1,000 characters), and a longer text only costs time.
MAX_QUERY_CHARS = 2_000
NOT_CONFIGURED = (
    "no embedding model is set: set PLAYBOOK_EMBEDDING_MODEL and PLAYBOOK_MODEL_BASE_URL"
)


@dataclass(frozen=True)
class Embedded:
    """Vectors for the texts asked about, in their order, with what they cost."""

    vectors: list[np.ndarray]
    usage: Usage
    latency_s: float
    model: str


def embed_id(bullet_id: str, hashed: str) -> str:
    """The delivery id of a lesson's embedding job: one per lesson and text."""
    return f"embed:{bullet_id}:{hashed[:16]}"


def make_client(settings: Settings, timeout: float) -> OpenAI:
    """A client for the endpoint of ``settings`` that gives up after ``timeout`` s, no retry."""
    return model_client.make_client(settings.model_base_url or "", settings.model_key, timeout)


def embed(client: OpenAI, model: str, texts: Sequence[str]) -> Embedded:
    """One embeddings request for ``texts``; raises ModelError (its usage counts the call)."""
    from openai import OpenAIError

    started = time.monotonic()
    try:
        # "float": the client would ask for base64 and decode it itself, which some
        # compatible servers do not speak; floats every one of them does.
        # Every text embedded leaves the process: masked as every exit masks (a lesson's
        # text holds no credential, a ticket's may), and never empty (servers refuse "").
        sent = [secrets.masked(text) or " " for text in texts]
        response: Any = client.embeddings.create(model=model, input=sent, encoding_format="float")
    except OpenAIError as error:
        # The chat client's reading of the failure: the same reasons, the key never shown.
        typed = model_client._model_error(error, client)
        raise ModelError(
            typed.reason,
            typed.detail,
            retry_after=typed.retry_after,
            usage=Usage(calls=1),
            latency_s=time.monotonic() - started,
        ) from None
    latency = time.monotonic() - started
    usage = getattr(response, "usage", None)
    # The server's count, bounded by what the texts can be (a hostile count spends no budget).
    spent = model_client.charged(
        getattr(usage, "prompt_tokens", 0),
        0,
        most_prompt=model_client.most_prompt_tokens(texts),
        max_tokens=0,
    )
    try:
        found = _vectors(response, len(texts))
    except ValueError as problem:
        raise ModelError(
            "bad_answer", f"not embeddings: {problem}", usage=spent, latency_s=latency
        ) from None
    return Embedded(found, spent, latency, getattr(response, "model", None) or model)


def _vectors(response: Any, count: int) -> list[np.ndarray]:
    """The answer's vectors in the order asked; ValueError naming what is wrong with it."""
    data = getattr(response, "data", None)
    if not isinstance(data, list):
        # A proxy's page or a wrong path answered 200: the client hands back text.
        raise ValueError("the answer has no list of embeddings")
    if len(data) != count:
        raise ValueError(f"{len(data)} embeddings for {count} texts")
    by_index: dict[int, np.ndarray] = {}
    for position, item in enumerate(data):
        index = getattr(item, "index", position)
        values = getattr(item, "embedding", None)
        if not isinstance(index, int) or not 0 <= index < count or index in by_index:
            raise ValueError("the embeddings' indexes do not match the texts")
        if not isinstance(values, list) or not values:
            raise ValueError("an embedding is not a list of numbers")
        if not all(isinstance(v, int | float) and math.isfinite(v) for v in values):
            raise ValueError("an embedding holds something other than finite numbers")
        by_index[index] = np.asarray(values, dtype=np.float32)
    dims = {len(v) for v in by_index.values()}
    if len(dims) > 1:
        raise ValueError(f"embeddings of different lengths ({', '.join(map(str, sorted(dims)))})")
    return [by_index[i] for i in range(count)]


def query_embedder(settings: Settings) -> Callable[[str], rerank.QueryEmbedding]:
    """The search's hook: a ticket's text to its vector, or no vector and why; never raises.

    One request with PLAYBOOK_EMBEDDING_TIMEOUT_SECONDS and no retry: a search waits for
    nothing longer. The client is made on first use (importing ``openai`` takes a while).
    """
    model = settings.embedding_model or ""
    timeout = settings.embedding_timeout_seconds
    made: list[OpenAI] = []
    lock = threading.Lock()

    def client() -> OpenAI:
        with lock:
            if not made:
                made.append(make_client(settings, timeout))
            return made[0]

    def embed_query(text: str) -> rerank.QueryEmbedding:
        started = time.monotonic()
        try:
            # A ticket may hold a pasted token: it goes no further than it already has (the
            # endpoint is often another company's service), as the rating prompts do.
            sent = secrets.masked(text, MAX_QUERY_CHARS) or " "
            got = embed(client(), model, [sent])
        except ModelError as error:
            metrics.model_call(PURPOSE, error)
            why = f"the embedding endpoint failed ({error})"
            if error.reason == "timeout":
                why += "; PLAYBOOK_EMBEDDING_TIMEOUT_SECONDS sets how long a search waits"
            return rerank.QueryEmbedding(None, model, why)
        except Exception as error:  # the search must answer, whatever the client does
            log.warning("the query embedding failed: %s", type(error).__name__)
            why = f"the embedding endpoint failed ({type(error).__name__})"
            return rerank.QueryEmbedding(None, model, why)
        metrics.model_call(PURPOSE, as_answer(got))
        log.debug("query embedded in %.3fs", time.monotonic() - started)
        return rerank.QueryEmbedding(got.vectors[0], model, None)

    return embed_query


def as_answer(got: Embedded) -> Answer[Any]:
    """An embeddings answer as the metrics count model answers."""
    return Answer(value=None, usage=got.usage, latency_s=got.latency_s, model=got.model)


# What this process is set to embed with (None: embeddings off). The listener is registered
# once and reads this, so building services again never registers it twice.
_active: dict[str, Any] = {"model": None, "key": None}
_install_lock = threading.Lock()


def install(settings: Settings, *, warm: bool = True) -> None:
    """Set the search's query hook, the rerank's settings and the embedding-job listener.

    Without an embedding model, the hook is removed and no job is queued: the search ranks by
    text alone. Installing the same settings again keeps the hook (and its client). ``warm``
    imports the endpoint's client in the background (for a long-lived process).
    """
    if not settings.embeddings_enabled:
        uninstall()
        return
    with _install_lock:
        key = (
            settings.model_base_url,
            settings.model_key,
            settings.embedding_model,
            settings.embedding_timeout_seconds,
        )
        if _active["key"] != key or retrieval.query_embedder is None:
            retrieval.query_embedder = query_embedder(settings)
            if warm:
                # `openai` takes from half a second to seconds to import: loaded now, the first
                # search does not spend its short wait for the ticket's embedding on that.
                threading.Thread(target=_import_client, name="embeddings-warm", daemon=True).start()
        _active.update(model=settings.embedding_model, key=key)
        retrieval.rerank_config = rerank_config(settings)
        if _queue_on_change not in lifecycle.change_listeners:
            lifecycle.change_listeners.append(_queue_on_change)


def _import_client() -> None:
    try:
        import openai.resources.embeddings  # noqa: F401
    except Exception as error:  # a warm-up only: the first search imports it otherwise
        log.debug("could not import the endpoint's client ahead: %s", type(error).__name__)


def uninstall() -> None:
    """Embeddings off in this process: searches rank by text, lesson changes queue nothing."""
    with _install_lock:
        _active.update(model=None, key=None)
        retrieval.query_embedder = None


def rerank_config(settings: Settings) -> rerank.RerankConfig:
    """The rerank's candidates and similarity weight from the settings (unset: the measured)."""
    weight = settings.rerank_similarity_weight
    return rerank.RerankConfig(
        candidates=settings.rerank_candidates,
        weight=rerank.DEFAULT_WEIGHT if weight is None else weight,
    )


def _queue_on_change(session: Session, bullet: Bullet) -> None:
    """An active lesson whose embedding is not current gets its job, in the change's
    transaction (so a rolled-back edit queues nothing)."""
    model = _active["model"]
    if model is None or bullet.status != "active":
        return
    if vectors.current(session, bullet.id, model):
        return
    queue(session, bullet.id, bullet.text)


def queue(session: Session, bullet_id: str, text: str) -> bool:
    """Queue the embedding job of a lesson's text; False if it already waits for a worker.

    A finished job of the same text is run again (the text came back after an edit, or the
    model changed): the job itself skips a lesson whose embedding is current.
    """
    hashed = vectors.text_hash(text)
    return inbox.enqueue(
        session,
        source=SOURCE,
        event=EMBED,
        delivery_id=embed_id(bullet_id, hashed),
        payload=json.dumps({"bullet": bullet_id, "text_hash": hashed}),
    )


@dataclass
class Backfill:
    """What a backfill found and did: the stale lessons, those queued, those already waiting."""

    stale: list[str] = field(default_factory=list)
    queued: list[str] = field(default_factory=list)
    waiting: list[str] = field(default_factory=list)


def backfill(
    engine: Engine,
    model: str,
    *,
    dry_run: bool = False,
    progress: Callable[[int, int], None] | None = None,
) -> Backfill:
    """Queue a job for each active lesson whose embedding by ``model`` is missing or stale.

    Committed every `BACKFILL_BATCH` lessons, so a worker starts on the first jobs while the
    rest are queued; a lesson whose job already waits is counted, not queued twice.
    """
    with db.transaction(engine) as session:
        stale = vectors.stale(session, model)
        if dry_run:
            jobs = {embed_id(i, vectors.text_hash(text)): i for i, text in stale}
            waits = inbox.waiting(session, SOURCE, list(jobs))
    done = Backfill(stale=[bullet_id for bullet_id, _ in stale])
    if dry_run:
        done.waiting = [jobs[delivery] for delivery in jobs if delivery in waits]
        return done
    for start in range(0, len(stale), BACKFILL_BATCH):
        batch = stale[start : start + BACKFILL_BATCH]
        with db.transaction(engine) as session:
            for bullet_id, text in batch:
                (done.queued if queue(session, bullet_id, text) else done.waiting).append(bullet_id)
        if progress is not None:
            progress(start + len(batch), len(stale))
    return done

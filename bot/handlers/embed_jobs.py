"""The model's worker runs this: embed one lesson's current text and store it for the rerank.

Queued by `bot.embeddings` when an active lesson is created or changed (and by
`embed --backfill`); how a failed call ends the job is `bot.embeddings.ask`'s.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import timedelta
from typing import TYPE_CHECKING

from bot import embeddings, metrics, model_jobs
from bot.handlers.context import Ignored, PermanentError
from bot.handlers.router import Event, Router
from bot.model_client import ModelError
from playbook import db
from playbook.models import Bullet
from playbook.search import vectors

if TYPE_CHECKING:
    from bot.services import Services

log = logging.getLogger(__name__)

router = Router()
# A 429 without Retry-After waits this long before the job is tried again.
RATE_LIMIT_WAIT = timedelta(minutes=1)


@router.register(embeddings.SOURCE, embeddings.EMBED)
def embed_lesson(event: Event, services: Services) -> None:
    """Embed the lesson the job names, unless it is gone, inactive, changed or current."""
    bullet_id, wanted = event.payload.get("bullet"), event.payload.get("text_hash")
    if not isinstance(bullet_id, str) or not bullet_id or not isinstance(wanted, str):
        raise PermanentError("the embedding job names no lesson or text hash")
    settings = services.settings
    if not settings.embeddings_enabled:
        raise Ignored(embeddings.NOT_CONFIGURED)
    model = settings.embedding_model or ""
    with db.transaction(services.engine) as session:
        bullet = session.get(Bullet, bullet_id)
        if bullet is None:
            raise Ignored(f"{bullet_id} is not a lesson")
        if bullet.status != "active":
            raise Ignored(f"{bullet_id} is {bullet.status}: only active lessons are embedded")
        text = bullet.text
        if vectors.text_hash(text) != wanted:
            raise Ignored(f"{bullet_id} changed since: the job of its new text embeds it")
        if vectors.current(session, bullet_id, model):
            raise Ignored(f"{bullet_id} is embedded by {model} already")
    got = ask(services, [text])
    vector = got.vectors[0]
    with db.transaction(services.engine) as session:
        index = vectors.VectorIndex.shared(session)
        index.sync(session, model)
        others = index.dim
        if others is not None and others != vector.size:
            raise PermanentError(
                f"embedding endpoint: model {model} answered {vector.size} dimensions, the "
                f"lessons it embedded before have {others}; if the endpoint now serves another "
                "model under that name, set PLAYBOOK_EMBEDDING_MODEL to a new name and run "
                "`playbook-bot embed --backfill`"
            )
        # The hash of the text embedded: an edit meanwhile leaves it stale for its own job.
        vectors.save(session, bullet_id, model=model, text_hash=wanted, vector=vector)
    log.info("%s embedded by %s (%d dimensions)", bullet_id, model, vector.size)


# The setting to change for each failure no retry can cure, as a dead job's reason says it.
_FIXES = {
    "auth": "check PLAYBOOK_MODEL_API_KEY",
    "not_found": "set PLAYBOOK_EMBEDDING_MODEL to an embedding model the endpoint serves",
    "bad_answer": "set PLAYBOOK_EMBEDDING_MODEL to an embedding model the endpoint serves",
    "bad_request": "check PLAYBOOK_MODEL_BASE_URL and PLAYBOOK_EMBEDDING_MODEL",
}


def ask(services: Services, texts: Sequence[str]) -> embeddings.Embedded:
    """Embed ``texts`` for a job within today's budget; a failure says how the job ends.

    Over budget: deferred to the next UTC day. 429: deferred until its Retry-After. Timeout
    or down: Transient. A refused key, an unknown model, an answer that is not embeddings:
    PermanentError naming the setting to fix. Every request counts against the budget.
    """
    settings = services.settings
    model_jobs.within_budget(services)
    client = embeddings.make_client(settings, settings.model_timeout_seconds)
    try:
        got = embeddings.embed(client, settings.embedding_model or "", texts)
    except ModelError as error:
        model_jobs.count(services, error.usage, failed=True)
        metrics.model_call(embeddings.PURPOSE, error)
        raise ending(error) from None
    model_jobs.count(services, got.usage, failed=False)
    metrics.model_call(embeddings.PURPOSE, embeddings.as_answer(got))
    return got


def ending(error: ModelError) -> Exception:
    """How a failed embeddings call ends the job's attempt (see `ask`)."""
    return model_jobs.ending(error, endpoint="embedding endpoint", fixes=_FIXES)

"""A playbook with an embedding model on the fake endpoint: services, the model worker, reads."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import SecretStr
from sqlalchemy import Engine, select

from bot import embeddings
from bot.config import Settings
from bot.worker import Services, Worker
from playbook.db import transaction
from playbook.lessons import lifecycle
from playbook.models import Delivery, Embedding, ModelUsage
from playbook.search import retrieval, vectors
from playbook.search.retrieval import Retriever, SearchResult
from playbook.search.text import Ticket
from tests.fakes.model import FakeModel

EMBED_MODEL = "embed-small"
MODEL_KEY = "sk-embed-" + "Kd93hQ7wLm2Xp5Tr8Vn1Zc4B"  # the shape of an API key


@dataclass
class World:
    """The test database, the fake endpoint, and the bot's services with embeddings on."""

    engine: Engine
    model: FakeModel
    settings: Settings

    @property
    def services(self) -> Services:
        """Services on these settings (building them installs the rerank's hook)."""
        return Services(engine=self.engine, settings=self.settings)

    def worker(self) -> Worker:
        """The model's worker (the queue embedding jobs run on)."""
        return Worker(self.services, name="model-worker", queue="model")

    def run_jobs(self) -> int:
        """The model worker, until no job is due; how many it claimed."""
        worker, total = self.worker(), 0
        while claimed := worker.run_once():
            total += claimed
        return total

    def add(self, text: str, *, scope: str = "global", status: str = "active") -> str:
        """A lesson, created through the lifecycle (as every door creates one); its id."""
        with transaction(self.engine) as session:
            added = lifecycle.add(
                session, text, learned_from="CTMS-1", scope=scope, actor="t", status=status
            )
            return added.bullet.id

    def edit(self, bullet_id: str, text: str) -> None:
        """Change a lesson's text."""
        with transaction(self.engine) as session:
            lifecycle.edit(session, bullet_id, actor="t", text=text)

    def search(self, text: str, k: int = 5) -> SearchResult:
        """Search as the doors do, in the global scope."""
        with transaction(self.engine) as session:
            return Retriever.shared(session).search(session, Ticket.from_text(text), k=k)

    def stop(self) -> None:
        """Stop the fake endpoint and take the rerank's hook down again."""
        self.model.stop()
        embeddings.uninstall()


def start_world(engine: Engine, settings: Settings, **changes: Any) -> World:
    """The fake endpoint serving an embedding model, and settings pointing at it."""
    model = FakeModel(models=("chat-model", EMBED_MODEL), api_key=MODEL_KEY)
    model.start()
    values: dict[str, Any] = {
        "model_base_url": model.base_url,
        "model_api_key": SecretStr(MODEL_KEY),
        "embedding_model": EMBED_MODEL,
        "model_timeout_seconds": 5.0,
        "embedding_timeout_seconds": 2.0,
    }
    values.update(changes)
    world = World(engine, model, settings.model_copy(update=values))
    world.services  # noqa: B018 - building services installs the hook and the job listener
    return world


def jobs(engine: Engine) -> list[Delivery]:
    """The embedding jobs in the inbox, oldest first."""
    with transaction(engine) as session:
        rows = session.scalars(
            select(Delivery).where(Delivery.event == embeddings.EMBED).order_by(Delivery.id)
        ).all()
        session.expunge_all()
        return list(rows)


def stale(engine: Engine) -> list[str]:
    """The active lessons whose embedding by the test model is missing or of an older text."""
    with transaction(engine) as session:
        return [bullet_id for bullet_id, _ in vectors.stale(session, EMBED_MODEL)]


def stored(engine: Engine, bullet_id: str) -> tuple[str, int, list[float]] | None:
    """A lesson's stored embedding: (model, dimensions, values), or None."""
    import numpy as np

    with transaction(engine) as session:
        row = session.get(Embedding, bullet_id)
        if row is None:
            return None
        values = np.frombuffer(bytes(row.vector), dtype="<f4").tolist()
        return row.model, row.dim, values


def usage(engine: Engine) -> list[tuple[int, int, int]]:
    """The endpoint's use per UTC day: (calls, tokens, failures)."""
    with transaction(engine) as session:
        rows = session.scalars(select(ModelUsage).order_by(ModelUsage.day))
        return [(r.calls, r.tokens, r.failures) for r in rows]


def hook() -> Any:
    """The search's query hook as installed now."""
    return retrieval.query_embedder

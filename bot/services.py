"""What a handler may use: the database, the settings, and side effects through `Effects`."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import Engine

from bot.config import Settings
from bot.effects import Effects, LiveEffects
from bot.logs import add_secrets


@dataclass
class Services:
    """What handlers may use: the database, settings and side effects."""

    engine: Engine
    settings: Settings
    effects: Effects | None = None

    def __post_init__(self) -> None:
        add_secrets(self.settings.secret_values())
        # The semantic rerank's hook and job listener follow these settings (off without an
        # embedding model), so every process that builds services searches the same way.
        from bot import embeddings

        embeddings.install(self.settings)
        if self.effects is None:
            self.effects = LiveEffects(self.settings)

    @property
    def out(self) -> Effects:
        """The side effects (live unless a dry run was asked for)."""
        assert self.effects is not None
        return self.effects

"""What every view of the web edge shares: the runtime (settings, engine) and JSON errors.

The blueprints import this, never ``webhooks.app``: the app factory imports the blueprints,
so imports run one way (app -> blueprints -> runtime).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

from flask import current_app, jsonify
from sqlalchemy import Engine

from bot.config import Settings
from playbook import db

_ENGINE_LOCK = threading.Lock()


@dataclass
class Runtime:
    """What the views share: settings and the database engine (opened on first use)."""

    settings: Settings
    _engine: Engine | None = field(default=None, repr=False)

    @property
    def engine(self) -> Engine:
        """The engine, with the SQLite schema created on first use."""
        if self._engine is None:
            # Two first requests at once would otherwise open two engines and leak one.
            with _ENGINE_LOCK:
                if self._engine is None:
                    engine = db.make_engine(self.settings.database_url)
                    db.ensure_schema(engine)
                    self._engine = engine
        return self._engine


def runtime() -> Runtime:
    """The runtime of the current app."""
    return current_app.extensions["playbook"]


def error(status: int, message: str, **extra: Any) -> tuple[Any, int]:
    """A JSON error response: every body has a status, errors a message."""
    return jsonify(status="error", message=message, **extra), status

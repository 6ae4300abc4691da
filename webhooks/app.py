"""The Flask application factory: blueprints, JSON errors, and the shared runtime."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from flask import Flask, current_app, jsonify
from sqlalchemy import Engine, exc
from werkzeug.exceptions import HTTPException

from bot.config import Settings
from bot.logs import add_secrets
from playbook import db
from playbook.errors import DatabaseUnavailable

log = logging.getLogger(__name__)


@dataclass
class Runtime:
    """What the views share: settings and the database engine (opened on first use)."""

    settings: Settings
    _engine: Engine | None = field(default=None, repr=False)

    @property
    def engine(self) -> Engine:
        """The engine, with the SQLite schema created on first use."""
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


def create_app(settings: Settings | None = None, engine: Engine | None = None) -> Flask:
    """Build the app; ``engine`` lets tests and the embedded server share one engine."""
    from webhooks import api, github, health, jira
    from webhooks.intake import Refused, database_down

    settings = settings or Settings()
    add_secrets(settings.secret_values())
    app = Flask(__name__)
    # Werkzeug answers 413 itself once a body passes this, before any view reads it.
    app.config["MAX_CONTENT_LENGTH"] = settings.max_body_bytes
    app.extensions["playbook"] = Runtime(settings=settings, _engine=engine)
    for blueprint in (github.blueprint, jira.blueprint, api.blueprint, health.blueprint):
        app.register_blueprint(blueprint)

    @app.errorhandler(HTTPException)
    def _http_error(problem: HTTPException) -> tuple[Any, int]:
        return error(problem.code or 500, problem.description or problem.name)

    @app.errorhandler(Refused)
    def _refused(problem: Refused) -> tuple[Any, int]:
        return error(problem.status, problem.message)

    @app.errorhandler(DatabaseUnavailable)
    @app.errorhandler(exc.OperationalError)
    @app.errorhandler(exc.InterfaceError)
    def _database_down(problem: Exception) -> tuple[Any, int]:
        # The driver's message names the server and the role; it goes to the log, scrubbed,
        # and the caller learns only that it should come back later.
        log.error("database unavailable: %s", db.describe_error(problem))
        return database_down()

    @app.errorhandler(Exception)
    def _unexpected(problem: Exception) -> tuple[Any, int]:
        # A sender retries on 5xx; say so plainly instead of a traceback page.
        log.exception("unhandled error")
        return error(500, "internal error; the delivery was not stored, please retry")

    if settings.insecure_skip_verify:
        log.warning(
            "PLAYBOOK_INSECURE_SKIP_VERIFY is on: GitHub deliveries are accepted WITHOUT "
            "signature checks. Never use this outside local development."
        )
    elif not settings.github_webhook_secret:
        log.warning("GITHUB_WEBHOOK_SECRET is not set: /webhooks/github refuses every delivery")
    if settings.jira_allow_unsigned and not settings.jira_webhook_secret:
        log.warning(
            "PLAYBOOK_JIRA_ALLOW_UNSIGNED is on: Jira deliveries are accepted WITHOUT a "
            "signature, so anyone who can reach /webhooks/jira can send events. Set "
            "JIRA_WEBHOOK_SECRET instead outside local testing."
        )
    elif not settings.jira_webhook_secret:
        log.warning("JIRA_WEBHOOK_SECRET is not set: /webhooks/jira refuses every delivery")
    return app

"""The Flask application factory: the blueprints and the JSON errors (views share runtime.py)."""

from __future__ import annotations

import logging
from typing import Any

from flask import Flask, Response, redirect, request
from flask.json.provider import DefaultJSONProvider
from flask_openapi3 import Info, OpenAPI, SecurityScheme
from sqlalchemy import Engine, exc
from werkzeug.exceptions import HTTPException

from bot.config import Settings
from bot.logs import add_secrets
from playbook import db
from playbook.errors import DatabaseUnavailable
from webhooks.runtime import Runtime, error

log = logging.getLogger(__name__)
_RETRY = {"Retry-After": "5"}


class _ParsedJSON(DefaultJSONProvider):
    """Request bodies parsed like webhook bodies: strict UTF-8, bounded depth, no NaN."""

    def loads(self, s: str | bytes, **kwargs: Any) -> Any:
        """The JSON value of a body; Refused (400) naming what is wrong with it."""
        from webhooks.intake import decode, parse

        return parse(decode(s) if isinstance(s, bytes) else s, lists=True)


class _PlaybookOpenAPI(OpenAPI):
    """The OpenAPI app, with the one hand-parsed request body described too."""

    def generate_spec_json(self) -> None:
        """The spec of the typed routes, plus POST /api/v1/usage's body."""
        from webhooks import api

        super().generate_spec_json()
        api.document(self.spec_json)


def _api_request() -> bool:
    return request.path.startswith("/api/")


def create_app(settings: Settings | None = None, engine: Engine | None = None) -> Flask:
    """Build the app; ``engine`` lets tests and the embedded server share one engine."""
    from importlib.metadata import version

    # The blueprints load here, not at the top: `from webhooks import gunicorn_conf` must set
    # PROMETHEUS_MULTIPROC_DIR before anything imports prometheus_client (metrics does).
    from webhooks import (
        api,
        api_anchors,
        api_consolidations,
        api_experiment,
        api_gaps,
        api_proposals,
        api_relevance,
        api_stale,
        api_supersede,
        github,
        health,
        jira,
        mcp_http,
        metrics,
        problems,
        setup,
        ui,
    )
    from webhooks.intake import Refused, database_down

    settings = settings or Settings()
    add_secrets(settings.secret_values())
    # The semantic rerank's hook and job listener follow these settings (off without a model).
    # Imported here: it loads the metrics, which gunicorn's settings must configure first.
    from bot import embeddings

    embeddings.install(settings)
    app = _PlaybookOpenAPI(
        __name__,
        info=Info(
            title="playbook-bot agent API",
            version=version("playbook-bot"),
            description="Search, read, cite and propose lessons of the playbook. Send "
            "`Authorization: Bearer <token>`: the maintainer token (PLAYBOOK_API_TOKEN) or an "
            "agent token (PLAYBOOK_AGENT_TOKENS). Errors are RFC 9457 problems.",
        ),
        security_schemes={"bearer": SecurityScheme(type="http", scheme="bearer")},
        doc_prefix="/api/v1",
        doc_url="/openapi.json",
        validation_error_status=400,
        validation_error_model=problems.Problem,
        validation_error_callback=problems.from_validation,
    )
    # Flask hands this to every request: get_json parses as the webhook intake does.
    app.json = _ParsedJSON(app)
    # Werkzeug answers 413 itself once a body passes this, before any view reads it.
    app.config["MAX_CONTENT_LENGTH"] = settings.max_body_bytes
    app.extensions["playbook"] = Runtime(settings=settings, _engine=engine)
    for blueprint in (
        github.blueprint,
        jira.blueprint,
        health.blueprint,
        mcp_http.blueprint,
        metrics.blueprint,
        setup.blueprint,
    ):
        app.register_blueprint(blueprint)
    app.register_api(api.api)
    app.register_api(api_anchors.api)
    app.register_api(api_consolidations.api)
    app.register_api(api_experiment.api)
    app.register_api(api_gaps.api)
    app.register_api(api_proposals.api)
    app.register_api(api_relevance.api)
    app.register_api(api_stale.api)
    app.register_api(api_supersede.api)
    # The interactive docs: Swagger UI, served from the package's own files (no CDN).
    app.add_url_rule("/api/v1/docs", "api_docs", lambda: redirect("/api/v1/swagger", code=302))
    ui.install(app, settings)

    @app.errorhandler(HTTPException)
    def _http_error(problem: HTTPException) -> tuple[Any, int] | Response:
        status = problem.code or 500
        # Keep the headers the exception carries (Allow on a 405).
        headers = {name: value for name, value in problem.get_headers() if name != "Content-Type"}
        if _api_request():
            return problems.problem(status, problem.description or problem.name, headers=headers)
        if ui.is_ui(request.path):
            return ui.error_page(status, problem.description or problem.name, headers)
        return error(status, problem.description or problem.name)

    @app.errorhandler(Refused)
    def _refused(problem: Refused) -> tuple[Any, int] | Response:
        if _api_request():
            return problems.problem(problem.status, problem.message, field="body")
        return error(problem.status, problem.message)

    @app.errorhandler(DatabaseUnavailable)
    @app.errorhandler(exc.OperationalError)
    @app.errorhandler(exc.InterfaceError)
    def _database_down(problem: Exception) -> tuple[Any, int] | Response:
        # The driver's message names the server and the role; it goes to the log, scrubbed,
        # and the caller learns only that it should come back later.
        log.error("database unavailable: %s", db.describe_error(problem))
        if _api_request():
            return problems.problem(
                503, "the playbook database is unavailable; retry later", headers=_RETRY
            )
        if ui.is_ui(request.path):
            return ui.error_page(503, "The playbook database is unavailable; retry later.", _RETRY)
        return database_down()

    @app.errorhandler(Exception)
    def _unexpected(problem: Exception) -> tuple[Any, int] | Response:
        # A sender retries on 5xx; say so plainly instead of a traceback page.
        log.exception("unhandled error")
        if _api_request():
            return problems.problem(500, "internal error; it is logged, please retry")
        if ui.is_ui(request.path):
            return ui.error_page(500, "Something went wrong on the server; it is logged.")
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

"""The maintainers' web page (/ui): lessons, proposals, deliveries and stats, server-rendered."""

from __future__ import annotations

from typing import Any

from flask import Blueprint, Flask, Response, redirect, render_template, request
from flask_wtf.csrf import CSRFError

from bot.config import Settings
from webhooks.runtime import runtime
from webhooks.ui import access, present


def _settings() -> Settings:
    return runtime().settings


def _blueprint() -> Blueprint:
    """The /ui routes, all in one list: what the page can do is read here."""
    from webhooks.ui import consolidations, deliveries, lessons, login, proposal_batches, stats

    read = access.reader(_settings)
    write = access.maintainer
    routes: list[tuple[str, str, Any, tuple[str, ...]]] = [
        ("/login", "login", login.login, ("GET", "POST")),
        # POST only, with the CSRF token: a link or image on another site cannot log you out.
        ("/logout", "logout", login.logout, ("POST",)),
        ("/", "lessons", read(lessons.lessons), ("GET",)),
        ("/lessons/<bullet_id>", "lesson", read(lessons.lesson), ("GET",)),
        ("/lessons/<bullet_id>/approve", "approve", write(lessons.approve), ("POST",)),
        ("/lessons/<bullet_id>/reject", "reject", write(lessons.reject), ("POST",)),
        ("/lessons/<bullet_id>/deprecate", "deprecate", write(lessons.deprecate), ("POST",)),
        ("/lessons/<bullet_id>/restore", "restore", write(lessons.restore), ("POST",)),
        ("/lessons/<bullet_id>/supersede", "supersede", write(lessons.supersede), ("POST",)),
        ("/lessons/<bullet_id>/clear-stale", "clear_stale", write(lessons.clear_stale), ("POST",)),
        ("/lessons/<bullet_id>/edit", "edit_form", write(lessons.edit_form), ("GET",)),
        ("/lessons/<bullet_id>/edit", "edit", write(lessons.edit), ("POST",)),
        ("/proposals", "proposals", read(proposal_batches.proposals), ("GET",)),
        ("/proposals/approve", "approve_all", write(proposal_batches.approve_all), ("POST",)),
        ("/proposals/reject", "reject_all", write(proposal_batches.reject_all), ("POST",)),
        (
            "/consolidations/<consolidation_id>/accept",
            "accept_consolidation",
            write(consolidations.accept),
            ("POST",),
        ),
        (
            "/consolidations/<consolidation_id>/reject",
            "reject_consolidation",
            write(consolidations.reject),
            ("POST",),
        ),
        (
            "/consolidations/<consolidation_id>/undo",
            "undo_consolidation",
            write(consolidations.undo),
            ("POST",),
        ),
        ("/stats", "stats", read(stats.stats), ("GET",)),
        # Deliveries hold payloads from private repositories and tracebacks: never public.
        ("/deliveries", "deliveries", write(deliveries.deliveries), ("GET",)),
        ("/deliveries/<delivery_id>", "delivery", write(deliveries.delivery), ("GET",)),
        ("/deliveries/<delivery_id>/post", "post_now", write(deliveries.post_now), ("POST",)),
    ]
    blueprint = Blueprint(
        "ui",
        __name__,
        url_prefix="/ui",
        template_folder="templates",
        static_folder="static",
        static_url_path="/static",
    )
    for rule, name, view, methods in routes:
        blueprint.add_url_rule(rule, name, view, methods=list(methods))
    # Every POST of the page, the login included, carries the session's CSRF token.
    blueprint.before_request(access.check_csrf)
    return blueprint


def is_ui(path: str) -> bool:
    """Whether a request is for the web page (HTML errors, page headers)."""
    return path == "/ui" or path.startswith("/ui/")


def error_page(status: int, message: str, headers: dict[str, str] | None = None) -> Response:
    """An HTML error page for /ui that says what to do next."""
    html = render_template("error.html", status=status, message=message)
    return Response(html, status=status, headers=headers, mimetype="text/html")


def install(app: Flask, settings: Settings) -> None:
    """Add /ui to the app: its routes, cookie, filters, headers and HTML errors."""
    access.configure(app, settings)
    present.install(app, settings)
    app.register_blueprint(_blueprint())
    app.add_url_rule("/ui", "ui_root", lambda: redirect("/ui/"))

    @app.context_processor
    def _page_context() -> dict[str, Any]:
        if not is_ui(request.path):
            return {}
        return {
            "csrf_token": access.csrf_token,
            "me": access.actor(),
            "public_read": settings.ui_public_read,
        }

    @app.after_request
    def _headers(response: Response) -> Response:
        if is_ui(request.path):
            access.secure_headers(response)
        return response

    @app.errorhandler(CSRFError)
    def _csrf_failed(problem: CSRFError) -> Response:
        return error_page(400, problem.description or "the form's CSRF token is missing")

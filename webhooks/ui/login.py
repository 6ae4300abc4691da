"""Logging in to /ui with the maintainer token, and out."""

from __future__ import annotations

from flask import flash, redirect, render_template, request, url_for
from werkzeug.wrappers import Response

from webhooks.runtime import runtime
from webhooks.ui import access


def login() -> str | Response | tuple[str, int]:
    """The login form; a POST with the maintainer token starts a session."""
    settings = runtime().settings
    target = access.safe_next(request.values.get("next"))
    if request.method == "GET":
        if access.actor() is not None:
            return redirect(target)
        return render_template("login.html", problem=None, target=target, name="")
    name = request.form.get("name", "")[:64]
    address = request.remote_addr or "-"
    if access.login_blocked(address):
        problem = "too many failed logins from your address; wait a minute and try again"
        html = render_template("login.html", problem=problem, target=target, name=name)
        return html, 429
    problem = access.log_in(settings, request.form.get("token", ""), name)
    if problem is not None:
        if problem is access.WRONG_TOKEN:
            access.login_failed(address)
        html = render_template("login.html", problem=problem, target=target, name=name)
        return html, 401 if settings.api_token else 503
    flash(f"logged in as {access.actor()}", "ok")
    return redirect(target)


def logout() -> Response:
    """End the session (a POST, so a link on another site cannot log you out)."""
    access.log_out()
    flash("logged out", "ok")
    return redirect(url_for("ui.login"))

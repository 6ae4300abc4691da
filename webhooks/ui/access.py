"""Who is looking at /ui: the maintainer-token login, its signed cookie, CSRF and page headers."""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
import threading
import time
from collections import deque
from collections.abc import Callable
from datetime import timedelta
from functools import wraps
from typing import Any, TypeVar
from urllib.parse import urlsplit

from flask import Flask, Response, abort, flash, g, redirect, request, session, url_for
from flask_wtf.csrf import CSRFError, generate_csrf, validate_csrf
from wtforms import ValidationError

from bot.callers import same
from bot.config import Settings
from playbook.agents import Caller

F = TypeVar("F", bound=Callable[..., Any])
# Who the login says it is: shown in revisions as ui:<name>, so keep it to a login's letters.
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._@-]{0,63}")
TOKEN_CHARS = 1_000
WRONG_TOKEN = "that is not the maintainer token (PLAYBOOK_API_TOKEN)"
# Failed logins a client address may make per window before it has to wait: a token is long
# and random, so this only stops a guessing loop from costing the server its constant-time
# comparisons. Per process: each gunicorn worker counts its own.
FAILED_LOGINS = 10
FAILED_WINDOW_SECONDS = 60.0
_failures: dict[str, deque[float]] = {}
_failures_lock = threading.Lock()


def _recent_failures(address: str, now: float) -> deque[float]:
    seen = _failures.setdefault(address, deque())
    while seen and now - seen[0] > FAILED_WINDOW_SECONDS:
        seen.popleft()
    if not seen:
        del _failures[address]
        return deque()
    return seen


def login_blocked(address: str) -> bool:
    """Whether ``address`` failed to log in too often in the last minute."""
    with _failures_lock:
        return len(_recent_failures(address, time.monotonic())) >= FAILED_LOGINS


def login_failed(address: str) -> None:
    """Count a failed login of ``address``."""
    now = time.monotonic()
    with _failures_lock:
        _recent_failures(address, now)
        if len(_failures) > 10_000:  # many addresses at once: forget the oldest half
            for key in list(_failures)[:5_000]:
                del _failures[key]
        _failures.setdefault(address, deque()).append(now)


def configure(app: Flask, settings: Settings) -> None:
    """Sign /ui sessions with a key derived from the maintainer token, and set the cookie."""
    # Derived, not random: every gunicorn worker and every restart signs alike, and a new
    # token logs everyone out. No token means no login at all, so any key will do then.
    if settings.api_token:
        key = hmac.new(settings.api_token.encode(), b"playbook-ui-session", hashlib.sha256)
        app.secret_key = key.hexdigest()
    else:
        app.secret_key = secrets.token_hex(32)
    app.config.update(
        SESSION_COOKIE_NAME="playbook_ui",
        SESSION_COOKIE_HTTPONLY=True,
        # Lax: a link to a lesson from a PR opens logged in; a form posted from another
        # site does not carry the cookie (and would fail the CSRF check anyway).
        SESSION_COOKIE_SAMESITE="Lax",
        SESSION_COOKIE_SECURE=settings.ui_secure_cookie,
        SESSION_COOKIE_PATH="/ui",
        PERMANENT_SESSION_LIFETIME=timedelta(hours=settings.ui_session_hours),
        # The CSRF token lives as long as the login, so a long-open page still posts.
        WTF_CSRF_TIME_LIMIT=None,
        WTF_CSRF_FIELD_NAME="csrf_token",
    )


def actor() -> str | None:
    """The logged-in maintainer as revisions name them (``ui:<name>``), or None."""
    who = session.get("actor")
    return who if isinstance(who, str) else None


def caller() -> Caller:
    """The logged-in maintainer as the domain's rules see them."""
    who = actor()
    if who is None:
        abort(403)
    return Caller(actor=who, role="maintainer")


def log_in(settings: Settings, token: str, name: str) -> str | None:
    """Start a session for the maintainer token; returns why not, or None."""
    if not settings.api_token:
        return "logins are off: set PLAYBOOK_API_TOKEN on the server"
    given = token.strip()[:TOKEN_CHARS]
    if not given or not same(given, settings.api_token):
        return WRONG_TOKEN
    name = name.strip()
    if name and not _NAME.fullmatch(name):
        return "a name is letters, digits and . _ @ - (up to 64), like a GitHub login"
    session.clear()  # a new session id's worth of state: nothing from before the login
    session.permanent = True
    session["actor"] = f"ui:{name or 'maintainer'}"
    return None


def log_out() -> None:
    """End the session."""
    session.clear()


def may_read(settings: Settings) -> bool:
    """Whether the visitor may see the read-only pages."""
    return actor() is not None or settings.ui_public_read


def _login_redirect() -> Response:
    return redirect(url_for("ui.login", next=request.full_path.rstrip("?")))


def reader(settings_of: Callable[[], Settings]) -> Callable[[F], F]:
    """A read-only page: public with PLAYBOOK_UI_PUBLIC_READ, else for logged-in maintainers."""

    def decorate(view: F) -> F:
        @wraps(view)
        def wrapped(*args: Any, **kwargs: Any) -> Any:
            if not may_read(settings_of()):
                return _login_redirect()
            return view(*args, **kwargs)

        return wrapped  # type: ignore[return-value]

    return decorate


def maintainer(view: F) -> F:
    """A page or action for logged-in maintainers only."""

    @wraps(view)
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        if actor() is None:
            if request.method == "POST":
                flash("log in to change the playbook", "error")
            return _login_redirect()
        return view(*args, **kwargs)

    return wrapped  # type: ignore[return-value]


def check_csrf() -> None:
    """Refuse a POST whose form lacks this session's CSRF token (400 with the fix)."""
    if request.method != "POST":
        return
    try:
        validate_csrf(request.form.get("csrf_token"))
    except ValidationError as problem:
        raise CSRFError(
            f"{problem} Reload the page and send the form again; forms only work from this "
            "site's own pages."
        ) from None


def csrf_token() -> str:
    """The token every form of the page carries."""
    return generate_csrf()


def safe_next(target: str | None) -> str:
    """Where to go after the login: a /ui path on this site, never another host."""
    if not target or len(target) > 2_000:
        return url_for("ui.lessons")
    parts = urlsplit(target)
    if parts.scheme or parts.netloc or not parts.path.startswith("/ui") or "\\" in target:
        return url_for("ui.lessons")
    return target


def nonce() -> str:
    """This response's CSP nonce (for the <style> of server-rendered charts)."""
    if "csp_nonce" not in g:
        g.csp_nonce = secrets.token_urlsafe(16)
    return g.csp_nonce


def secure_headers(response: Response) -> Response:
    """The headers every /ui response carries: CSP with no inline script, no framing."""
    policy = (
        "default-src 'none'; script-src 'self'; "
        f"style-src 'self' 'nonce-{nonce()}'; img-src 'self' data:; font-src 'self'; "
        "form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
    )
    response.headers["Content-Security-Policy"] = policy
    response.headers["X-Frame-Options"] = "DENY"
    response.headers["Referrer-Policy"] = "no-referrer"
    response.headers["X-Content-Type-Options"] = "nosniff"
    if not request.path.startswith("/ui/static/"):
        # Pages show what only a logged-in maintainer may see: no shared cache keeps them.
        response.headers["Cache-Control"] = "no-store"
    return response

"""The first run's setup page (/setup): register the GitHub App from its manifest, connect Jira.

Served only until a GitHub App is set up, and only to whoever holds the one-time token the
server printed when it started (as notebook servers do): nobody else can claim the server.
"""

from __future__ import annotations

import json
import logging
import secrets
import sys
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from flask import (
    Blueprint,
    Flask,
    Response,
    current_app,
    jsonify,
    redirect,
    render_template,
    request,
)
from itsdangerous import BadSignature, URLSafeTimedSerializer

from bot import app_credentials
from bot.config import Settings
from bot.logs import add_secrets
from bot.settings_first_run import web_address
from webhooks import setup_github, setup_jira, setup_manifest, signatures
from webhooks.runtime import runtime

log = logging.getLogger(__name__)
blueprint = Blueprint("setup", __name__)
COOKIE = "playbook_setup"
_TOKEN_KEY = "playbook_setup_token"
NO_TOKEN = (
    "This setup page needs the one-time token playbook-bot printed when it started: open the "
    "address /setup?token=... from its log."
)
DONE = "The GitHub App is set up, so this setup page is gone; the web page is at /ui/."


def needs_setup(settings: Settings) -> bool:
    """Whether no GitHub App (nor a personal token) is configured, here or by another process."""
    if settings.github_app_id or settings.github_token:
        return False
    return not settings.credentials_file.exists()


def announce(app: Flask, *, echo: bool = True) -> str | None:
    """Make the setup token when no App is set up, print where to use it, and return it.

    With ``echo`` the address is printed on stderr (`serve` prints its own line instead).

    `serve` and the gunicorn entry point call this at start; apps made for tests do not, so
    building one writes no file.
    """
    settings: Settings = app.extensions["playbook"].settings
    if not needs_setup(settings):
        return None
    try:
        token = app_credentials.setup_token(settings.data_dir)
    except OSError as error:
        # A read-only data directory: a token of this process alone still lets `serve` work.
        log.warning("cannot keep the setup token in %s (%s)", settings.data_dir, error.strerror)
        token = secrets.token_urlsafe(32)
    app.extensions[_TOKEN_KEY] = token
    address = f"{settings.public_url or ''}/setup?token={token}"
    where = "" if settings.public_url else " on this server's address"
    # The log masks credentials, the token too: the address goes to the process's own output
    # (gunicorn's and Compose's log), as notebook servers print theirs, and the log says where.
    if echo:
        message = f"No GitHub App is set up yet: open {address}{where} to register one"
        print(message, file=sys.stderr, flush=True)
    log.warning(
        "No GitHub App is set up yet: open the setup address printed on the server's output "
        "(the token is also in %s) to register one",
        Path(settings.data_dir) / app_credentials.TOKEN_FILE_NAME,
    )
    return token


def _token() -> str | None:
    return current_app.extensions.get(_TOKEN_KEY)


def _signer(token: str) -> URLSafeTimedSerializer:
    return URLSafeTimedSerializer(token, salt="playbook-setup")


def _state() -> str | None:
    """The manifest flow's state of this browser's setup session, or None without one."""
    token = _token()
    cookie = request.cookies.get(COOKIE, "")
    if not token or not cookie or len(cookie) > 500:
        return None
    max_age = int(runtime().settings.ui_session_hours * 3600)
    try:
        session = _signer(token).loads(cookie, max_age=max_age)
    except BadSignature:
        return None
    state = session.get("state") if isinstance(session, dict) else None
    return state if isinstance(state, str) else None


def _page(template: str, status: int = 200, **values: Any) -> Response:
    response = Response(render_template(template, **values), status=status, mimetype="text/html")
    return _headers(response)


def _headers(response: Response) -> Response:
    # No inline script; forms may go to GitHub only (the manifest is posted there).
    github = runtime().settings.github_web_url
    response.headers["Content-Security-Policy"] = (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        f"connect-src 'self'; form-action 'self' {github}; frame-ancestors 'none'; "
        "base-uri 'none'"
    )
    response.headers["Referrer-Policy"] = "no-referrer"
    response.headers["X-Content-Type-Options"] = "nosniff"
    response.headers["Cache-Control"] = "no-store"
    return response


def _refused(status: int, message: str, again: bool = False) -> Response:
    """A page saying why not; ``again`` links back to the setup page to start over."""
    link = "/setup" if again else None
    return _page("setup_message.html", status, title="Setup", message=message, link=link)


def _gate() -> tuple[int, str] | str:
    """The session's state, or why not: (404, ...) once set up, (403, ...) without the token."""
    if not needs_setup(runtime().settings):
        return 404, DONE
    state = _state()
    return (403, NO_TOKEN) if state is None else state


@blueprint.get("/")
def root() -> Response:
    """The setup page until an App is set up, the web page after."""
    return redirect("/setup" if needs_setup(runtime().settings) else "/ui/", code=302)


@blueprint.get("/setup")
def setup() -> Response:
    """The page: open it with ?token=... once, then the cookie it sets lets this browser in."""
    if not needs_setup(runtime().settings):
        return _refused(404, DONE)
    given = request.args.get("token")
    if given is not None:
        token = _token()
        if not token or not signatures.same(given[:200], token):
            return _refused(403, "That is not the setup token playbook-bot printed in its log.")
        # The token leaves the address bar (and the history) at once; the cookie carries on.
        response = redirect("/setup", code=303)
        state = secrets.token_urlsafe(24)
        response.set_cookie(
            COOKIE,
            _signer(token).dumps({"state": state}),
            max_age=int(runtime().settings.ui_session_hours * 3600),
            path="/setup",
            httponly=True,
            secure=request.is_secure,
            # Lax: GitHub's redirect back to the callback is a top-level GET, which carries it.
            samesite="Lax",
        )
        return _headers(response)
    gate = _gate()
    if isinstance(gate, tuple):
        return _refused(*gate)
    return _registration_page(gate)


def _registration_page(state: str) -> Response:
    settings = runtime().settings
    problems: list[str] = []
    typed = request.args.get("public_url", "").strip()[:600]
    public_url = settings.public_url or request.host_url.rstrip("/")
    if typed:
        try:
            public_url = web_address(typed, "https://playbook.example.com") or public_url
        except ValueError as error:
            problems.append(f"The public address {error}.")
    org = request.args.get("org", "").strip()[:100]
    if org and (problem := setup_manifest.org_problem(org)):
        problems.append(f"The organisation: {problem}.")
        org = ""
    name = request.args.get("name", "").strip()[:100] or setup_manifest.default_name()
    if problem := setup_manifest.name_problem(name):
        problems.append(f"The App's name: {problem}.")
        name = setup_manifest.default_name()
    host = urlsplit(public_url).hostname or ""
    token = _token() or ""
    return _page(
        "setup.html",
        400 if problems else 200,
        problems=problems,
        public_url=public_url,
        public_url_set=bool(settings.public_url or typed),
        local=host in ("localhost", "::1") or host.startswith("127."),
        org=org,
        name=name,
        github=settings.github_web_url,
        register_url=setup_manifest.registration_url(settings.github_web_url, state, org or None),
        manifest=json.dumps(setup_manifest.manifest(public_url, name)),
        jira_events=setup_jira.EVENTS,
        jql=setup_jira.JQL_EXAMPLE,
        jira_secret_set=bool(settings.jira_webhook_secret),
        jira_secret=setup_jira.suggested_secret(token),
        jira_last=setup_jira.last(),
    )


@blueprint.get(setup_manifest.CALLBACK_PATH)
def callback() -> Response:
    """GitHub sends the browser here with ?code=...&state=... once it registered the App."""
    gate = _gate()
    if isinstance(gate, tuple):
        return _refused(*gate)
    given = request.args.get("state", "")
    if not given or not signatures.same(given[:200], gate):
        return _refused(
            400,
            "The state GitHub sent back is not this browser's setup session's: open the setup "
            "page again and register from there.",
            again=True,
        )
    code = request.args.get("code", "")
    if not setup_github.CODE.fullmatch(code):
        return _refused(400, "GitHub's code is missing or is not a code GitHub gives.", True)
    settings = runtime().settings
    try:
        credentials, owner = setup_github.exchange(
            settings.github_api_url, code, settings.http_timeout_seconds
        )
    except setup_github.ExchangeFailed as failed:
        return _refused(failed.status, failed.message, again=True)
    try:
        _store(settings, credentials)
    except FileExistsError:
        return _refused(
            409,
            f"Another App was set up meanwhile (from another tab?) and stays the one in use; "
            f"delete the App {credentials.slug} GitHub just registered in its settings on GitHub.",
        )
    log.warning(
        "GitHub App %s (id %d) registered by the setup page; its credentials are in %s",
        credentials.slug,
        credentials.app_id,
        settings.credentials_file,
    )
    response = _page(
        "setup_done.html",
        slug=credentials.slug,
        owner=owner,
        install_url=f"{credentials.html_url}/installations/new",
        path=str(settings.credentials_file),
    )
    response.delete_cookie(COOKIE, path="/setup")
    return response


def _store(settings: Settings, credentials: app_credentials.AppCredentials) -> None:
    """Write the file every process reads at start, and use the App in this one at once."""
    key_lines = [line for line in credentials.pem.splitlines() if "-----" not in line]
    add_secrets([credentials.webhook_secret, *key_lines])
    app_credentials.write(settings.credentials_file, credentials)  # FileExistsError: not ours
    app_credentials.forget_setup_token(settings.data_dir)
    current_app.extensions.pop(_TOKEN_KEY, None)
    # /webhooks/github reads the runtime's settings on each delivery: it verifies with the new
    # secret from now on. The worker and other processes read the file when they restart.
    runtime().settings = settings.model_copy(
        update={
            "github_app_id": credentials.app_id,
            "github_app_private_key": credentials.pem,
            "github_app_private_key_file": None,
            "github_webhook_secret": credentials.webhook_secret,
        }
    )


@blueprint.get("/setup/jira/last")
def jira_last() -> Any:
    """What last reached /webhooks/jira, for the page's "send a test delivery" check."""
    gate = _gate()
    if isinstance(gate, tuple):
        status, message = gate
        return _headers(jsonify(status="error", message=message)), status
    return _headers(jsonify(setup_jira.last()))

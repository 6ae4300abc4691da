"""WSGI entry point for gunicorn: `gunicorn -c python:webhooks.gunicorn_conf webhooks.wsgi:app`."""

from bot.config import Settings
from bot.logs import configure_logging
from webhooks import setup
from webhooks.app import create_app
from webhooks.body_deadline import BodyDeadline

settings = Settings()
configure_logging(settings.log_level, settings.log_format, settings.secret_values())
app = create_app(settings)
# No GitHub App yet: every worker logs the same one-time address of the setup page.
setup.announce(app)
# Flask's place for WSGI middleware: `app` stays the Flask app, its requests go through this.
# From the end of the headers to the last byte of the body: PLAYBOOK_CLIENT_TIMEOUT_SECONDS
# (10 s; GitHub gives up on an answer after 10 s, so a slower delivery is lost to it anyway).
app.wsgi_app = BodyDeadline(  # type: ignore[method-assign]
    app.wsgi_app, settings.max_body_bytes, settings.client_timeout_seconds
)

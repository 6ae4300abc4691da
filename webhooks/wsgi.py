"""WSGI entry point for gunicorn: `gunicorn -c python:webhooks.gunicorn_conf webhooks.wsgi:app`."""

from bot.config import Settings
from bot.logs import configure_logging
from webhooks.app import create_app
from webhooks.body_deadline import BodyDeadline

settings = Settings()
configure_logging(settings.log_level, settings.log_format, settings.secret_values())
app = create_app(settings)
# Flask's place for WSGI middleware: `app` stays the Flask app, its requests go through this.
app.wsgi_app = BodyDeadline(app.wsgi_app, settings.max_body_bytes)  # type: ignore[method-assign]

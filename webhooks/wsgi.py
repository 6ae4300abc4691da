"""WSGI entry point for gunicorn: `gunicorn webhooks.wsgi:app`."""

from bot.config import Settings
from bot.logs import configure_logging
from webhooks.app import create_app

settings = Settings()
configure_logging(settings.log_level, settings.log_format, settings.secret_values())
app = create_app(settings)

"""The HTTP edge: Flask app that verifies, persists and acknowledges webhook deliveries."""

from webhooks.app import create_app

__all__ = ["create_app"]

"""Logging set-up: human text or JSON lines, with the delivery id on every record."""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from pythonjsonlogger.json import JsonFormatter

TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s [%(delivery)s] %(message)s"

# The delivery being handled by this request or worker thread; "-" outside one.
current_delivery: ContextVar[str] = ContextVar("current_delivery", default="-")


class DeliveryFilter(logging.Filter):
    """Stamps each record with the current delivery id, so one event can be followed end to end."""

    def filter(self, record: logging.LogRecord) -> bool:
        """Add ``record.delivery``; never drops a record."""
        record.delivery = current_delivery.get()
        return True


@contextmanager
def delivery_context(delivery_id: str) -> Iterator[None]:
    """Log everything inside the block under ``delivery_id``."""
    token = current_delivery.set(delivery_id)
    try:
        yield
    finally:
        current_delivery.reset(token)


def configure_logging(level: str = "INFO", fmt: str = "text") -> None:
    """Send log records to stderr as text or JSON, replacing earlier handlers."""
    handler = logging.StreamHandler(sys.stderr)
    handler.addFilter(DeliveryFilter())
    if fmt == "json":
        handler.setFormatter(
            JsonFormatter(
                "%(asctime)s %(levelname)s %(name)s %(delivery)s %(message)s",
                rename_fields={"asctime": "time", "levelname": "level", "name": "logger"},
            )
        )
    else:
        handler.setFormatter(logging.Formatter(TEXT_FORMAT))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    # Alembic narrates every migration step at INFO; that is noise in a CLI's output.
    logging.getLogger("alembic").setLevel(max(root.level, logging.WARNING))

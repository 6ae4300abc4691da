"""Liveness and readiness probes."""

from __future__ import annotations

from typing import Any

from flask import Blueprint, jsonify
from sqlalchemy import text

from webhooks.app import error, runtime

blueprint = Blueprint("health", __name__)


@blueprint.get("/healthz")
def healthz() -> tuple[Any, int]:
    """The process is up."""
    return jsonify(status="ok"), 200


@blueprint.get("/readyz")
def readyz() -> tuple[Any, int]:
    """The process can reach its database."""
    try:
        with runtime().engine.connect() as connection:
            connection.execute(text("SELECT 1"))
    except Exception as problem:  # any failure means "not ready", never a 500
        return error(503, f"database unavailable: {str(problem).splitlines()[0]}")
    return jsonify(status="ok"), 200

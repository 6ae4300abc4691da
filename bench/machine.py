"""What a bench's numbers were measured on: cores, versions, load (no host names, no paths)."""

from __future__ import annotations

import os
import platform
import sqlite3
from typing import Any

from sqlalchemy import text

from playbook import db


def describe(server_url: str | None) -> dict[str, Any]:
    """Cores, Python and SQLite versions, load average, and PostgreSQL's version if given."""
    info: dict[str, Any] = {
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "sqlite": sqlite3.sqlite_version,
        "load_average": [round(x, 2) for x in os.getloadavg()],
    }
    if server_url:
        engine = db.make_engine(server_url)
        with engine.connect() as connection:
            info["postgresql"] = connection.execute(text("SHOW server_version")).scalar()
        engine.dispose()
    return info

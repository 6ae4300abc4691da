"""Fixtures of the web edge's tests: one app per module for the tests that only send requests."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from flask import Flask
from sqlalchemy import Engine


@pytest.fixture(scope="module")
def module_apps() -> dict[str, Flask]:
    """The apps ``shared_app`` built in this module, by their settings' changes."""
    return {}


@pytest.fixture
def shared_app(
    module_apps: dict[str, Flask], settings: Any, engine: Engine
) -> Callable[..., Flask]:
    """``create_app`` on the test settings with ``changes``, built once per module for each set
    of changes: for tests that only send requests and never change the app.

    Building an app costs a tenth of a second or more, and a module sends a hundred requests.
    The database is still emptied before each test (``engine``, the engine every app here is
    built on). An app with an embedding model is built for each test: its search hook belongs
    to the process and follows the app built last.
    """
    from webhooks import create_app

    def build(**changes: Any) -> Flask:
        configured = settings.model_copy(update=changes)
        if configured.embeddings_enabled:
            return create_app(configured, engine=engine)
        key = repr(sorted(changes.items()))
        if key not in module_apps:
            module_apps[key] = create_app(configured, engine=engine)
        return module_apps[key]

    return build

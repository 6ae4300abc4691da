"""Fixtures of the web edge's tests: one app per module for the tests that only send requests."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from flask import Flask
from sqlalchemy import Engine


@pytest.fixture(scope="module")
def module_apps() -> list[tuple[Any, Flask]]:
    """The apps ``shared_app`` built in this module, each with its settings."""
    return []


@pytest.fixture
def shared_app(
    module_apps: list[tuple[Any, Flask]], settings: Any, engine: Engine
) -> Callable[..., Flask]:
    """``create_app`` on the test settings with ``changes``, built once per module for the same
    settings: for tests that only send requests and never change the app.

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
        # Settings compare by value (secrets too): the same settings get the same app.
        for built_with, app in module_apps:
            if built_with == configured:
                return app
        app = create_app(configured, engine=engine)
        module_apps.append((configured, app))
        return app

    return build

"""Shared fixtures: a migrated database per test run (SQLite, or PostgreSQL when configured)."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from hypothesis import settings as hypothesis_settings
from sqlalchemy import Engine, create_engine, delete, text, update
from sqlalchemy.engine import make_url

from playbook import clock, db
from playbook.models import Base, PlaybookMeta
from playbook.search import retrieval
from tests.payloads import fixture_body
from tests.support import GITHUB_SECRET, JIRA_SECRET

PG_ENV = "PLAYBOOK_TEST_DATABASE_URL"

# Property tests keep hypothesis' 100 examples (a test that needs more or fewer says so) but no
# deadline: a 200 ms deadline fails a correct test on a busy machine, and a hang is caught
# anyway (with no deadline, generation counts as too slow only after 30 s). Loaded here, before
# any test module builds its own settings, so theirs inherit it; `--hypothesis-profile default`
# runs with hypothesis' own defaults instead.
hypothesis_settings.register_profile("ci", deadline=None, max_examples=100, print_blob=True)
hypothesis_settings.load_profile("ci")


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects by marker
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark `db` every test that reaches the test database (through `database_url`, which
    `engine`, `cli`, `app` and the rest build on): `.ci/run`'s PostgreSQL run takes only
    those (`-m db`), and a pure function is not tested twice."""
    for item in items:
        if "database_url" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.db)


@pytest.fixture(scope="session")
def database_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A database URL private to this test run: a fresh SQLite file or a fresh PostgreSQL schema."""
    server_url = os.environ.get(PG_ENV)
    if not server_url:
        yield f"sqlite:///{tmp_path_factory.mktemp('db') / 'playbook.db'}"
        return
    # A schema per run keeps concurrent or leftover runs on the same server from seeing each
    # other's rows; search_path in the URL makes every engine (CLI, subprocesses) use it.
    schema = f"pbtest_{uuid.uuid4().hex[:12]}"
    admin = create_engine(server_url)
    with admin.begin() as connection:
        connection.execute(text(f'CREATE SCHEMA "{schema}"'))
    url = make_url(server_url).update_query_dict({"options": f"-csearch_path={schema}"})
    try:
        yield url.render_as_string(hide_password=False)
    finally:
        with admin.begin() as connection:
            connection.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))
        admin.dispose()


@pytest.fixture(scope="session")
def migrated_engine(database_url: str) -> Iterator[Engine]:
    """One engine per run, migrated to head with the real Alembic migrations."""
    engine = db.make_engine(database_url)
    db.upgrade(engine)
    yield engine
    engine.dispose()


@pytest.fixture
def engine(migrated_engine: Engine) -> Engine:
    """The run's engine with every table emptied, so each test starts from a new playbook."""
    with migrated_engine.begin() as connection:
        for table in reversed(Base.metadata.sorted_tables):
            if table.name != PlaybookMeta.__tablename__:
                connection.execute(delete(table))
        connection.execute(update(PlaybookMeta).values(value=0))
    retrieval.forget_shared()  # the playbook was emptied under the process's search index
    return migrated_engine


@pytest.fixture
def seeded(engine: Engine) -> Engine:
    """The standard small playbook, on the test database (returned, to read it back):

    - pb-1 "Retry webhooks with an idempotency key": active, global scope, from CTMS-1
    - pb-2 "Never hold a database lock across HTTP": active, global scope, from CTMS-2
    - pb-3 "Pin chromium in CI for screenshots": active, scope acme/api, from acme/api#3
    - pb-4 "Vendor the chart library for the stats page": active, scope other/web,
      from other/web#9
    - pb-5 "Cache the search index between requests": proposed, global scope, from CTMS-5

    No usage, no tickets seen (``tests.support.saw`` makes some), no deliveries.
    """
    from playbook.lessons import lifecycle

    lessons = [
        ("Retry webhooks with an idempotency key", "CTMS-1", "global", "active"),
        ("Never hold a database lock across HTTP", "CTMS-2", "global", "active"),
        ("Pin chromium in CI for screenshots", "acme/api#3", "acme/api", "active"),
        ("Vendor the chart library for the stats page", "other/web#9", "other/web", "active"),
        ("Cache the search index between requests", "CTMS-5", "global", "proposed"),
    ]
    with db.transaction(engine) as session:
        for text, learned_from, scope, status in lessons:
            lifecycle.add(
                session, text, learned_from=learned_from, scope=scope, actor="t", status=status
            )
    return engine


@pytest.fixture(autouse=True)
def _restore_clock() -> Iterator[None]:
    # Tests pin the clock; put the real one back whatever the test did.
    yield
    clock.reset()


@pytest.fixture
def cli(engine: Engine, database_url: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    """Run `playbook-bot ARGS` in-process against the test database; returns click's Result."""
    from bot.cli import main

    monkeypatch.setenv("PLAYBOOK_DATABASE_URL", database_url)
    monkeypatch.setenv("PLAYBOOK_ACTOR", "tester")
    monkeypatch.chdir(tmp_path)  # keep a stray .env or playbook.db of the checkout out of tests

    def run(*args: str, input: str | None = None) -> Result:
        return CliRunner().invoke(main, list(args), input=input, catch_exceptions=False)

    return run


@pytest.fixture
def settings(database_url: str):
    """Settings for the web app and worker, pointing at the test database."""
    from bot.config import Settings

    return Settings(
        PLAYBOOK_DATABASE_URL=database_url,
        GITHUB_WEBHOOK_SECRET=GITHUB_SECRET,
        JIRA_WEBHOOK_SECRET=JIRA_SECRET,
        PLAYBOOK_API_TOKEN="agent-token",
        PLAYBOOK_RETRY_BASE_SECONDS=10,
        _env_file=None,
    )


@pytest.fixture
def app(engine: Engine, settings):
    """The Flask app on the test database."""
    from webhooks import create_app

    return create_app(settings, engine=engine)


@pytest.fixture
def client(app):
    """Flask's test client."""
    return app.test_client()


@pytest.fixture
def api(engine: Engine, settings):
    """A test client of the app with the maintainer token and one agent token, `bot:agent`."""
    from webhooks import create_app

    tokens = {"api_token": "maintainer-token", "agent_tokens": "bot:agent"}
    return create_app(settings.model_copy(update=tokens), engine=engine).test_client()


@pytest.fixture
def deliver(client):
    """POST a fixture to the GitHub endpoint with the headers and signature GitHub sends."""
    import uuid as _uuid

    from webhooks.signatures import sign

    def send(name: str, *, delivery: str | None = None, body: bytes | None = None, **changes):
        event = name.split(".", maxsplit=1)[0]
        raw = body if body is not None else fixture_body(name, **changes)
        headers = {
            "X-GitHub-Event": event,
            "X-GitHub-Delivery": delivery or str(_uuid.uuid4()),
            "X-Hub-Signature-256": sign(GITHUB_SECRET, raw),
            "User-Agent": "GitHub-Hookshot/test",
        }
        return client.post(
            "/webhooks/github", data=raw, headers=headers, content_type="application/json"
        )

    return send


@pytest.fixture
def loop(engine: Engine, database_url: str):
    """The whole bot against fake GitHub and Jira servers (see loop_harness)."""
    from tests.loop_harness import start_loop

    running = start_loop(engine, database_url)
    yield running
    running.github.stop()
    running.jira.stop()

"""Schema management: migrations build the models' schema; first use and stale schemas."""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import Engine, create_engine, inspect, text
from sqlalchemy.engine import make_url

from playbook import db
from playbook.errors import DatabaseUnavailable
from playbook.lessons import lifecycle
from playbook.models import Base


def test_schema_head_constant_matches_the_migration_scripts(engine: Engine) -> None:
    assert db.head_revision(engine) == db.SCHEMA_HEAD
    assert db.current_revision(engine) == db.SCHEMA_HEAD


def test_migrations_build_exactly_the_models_schema(engine: Engine) -> None:
    with engine.connect() as connection:
        diff = compare_metadata(MigrationContext.configure(connection), Base.metadata)
    assert diff == []


def test_first_use_of_a_new_sqlite_file_creates_the_schema(tmp_path: Path) -> None:
    engine = db.make_engine(f"sqlite:///{tmp_path / 'new.db'}")
    assert db.current_revision(engine) is None
    db.ensure_schema(engine)
    assert db.current_revision(engine) == db.SCHEMA_HEAD
    with db.transaction(engine) as session:
        assert lifecycle.add(session, "x y z", learned_from="A-1", actor="t").bullet.id == "pb-1"
    engine.dispose()


@pytest.mark.db
@pytest.mark.skipif(
    not os.environ.get("PLAYBOOK_TEST_DATABASE_URL"), reason="needs PLAYBOOK_TEST_DATABASE_URL"
)
def test_an_unmigrated_postgres_database_is_refused_with_the_fix() -> None:
    server = os.environ["PLAYBOOK_TEST_DATABASE_URL"]
    schema = f"pbempty_{uuid.uuid4().hex[:10]}"
    admin = create_engine(server)
    with admin.begin() as connection:
        connection.execute(text(f'CREATE SCHEMA "{schema}"'))
    try:
        url = make_url(server).update_query_dict({"options": f"-csearch_path={schema}"})
        engine = db.make_engine(url.render_as_string(hide_password=False))
        with pytest.raises(DatabaseUnavailable, match="playbook-bot db upgrade"):
            db.ensure_schema(engine)
        db.upgrade(engine)
        db.ensure_schema(engine)
        assert "bullets" in inspect(engine).get_table_names()
        engine.dispose()
    finally:
        with admin.begin() as connection:
            connection.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))
        admin.dispose()


def test_downgrade_then_upgrade_round_trips(tmp_path: Path) -> None:
    from alembic import command

    engine = db.make_engine(f"sqlite:///{tmp_path / 'cycle.db'}")
    db.upgrade(engine)
    command.downgrade(db.alembic_config(engine), "base")
    assert "bullets" not in inspect(engine).get_table_names()
    db.upgrade(engine)
    assert "bullets" in inspect(engine).get_table_names()
    engine.dispose()


def test_a_pooled_connection_the_server_closed_is_replaced_after_it_sat_idle(
    database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A database restart or failover closes the connections waiting in each process's pool;
    # the next transaction must get a live one, not an error.
    if not database_url.startswith("postgresql"):
        pytest.skip("a server closes connections; SQLite opens a file")
    monkeypatch.setattr(db, "PING_AFTER_IDLE_SECONDS", 0.0)
    engine = db.make_engine(database_url)
    try:
        with engine.connect() as connection:
            pid = connection.scalar(text("SELECT pg_backend_pid()"))
        admin = create_engine(database_url)
        with admin.begin() as connection:
            assert connection.scalar(text("SELECT pg_terminate_backend(:pid)"), {"pid": pid})
        admin.dispose()
        with db.transaction(engine) as session:
            assert session.scalar(text("SELECT pg_backend_pid()")) != pid
    finally:
        engine.dispose()


def test_migration_0009_tells_the_ticket_of_deliveries_stored_before_it(engine: Engine) -> None:
    from alembic import command
    from sqlalchemy import column, insert, select, table

    from playbook.models import Delivery

    command.downgrade(db.alembic_config(engine), "0008")
    try:
        old = table(
            "deliveries",
            *(column(name) for name in ("id", "source", "event", "delivery_id", "payload")),
            *(column(name) for name in ("headers", "received_at", "status", "attempts")),
            column("next_attempt_at"),
        )
        now = "2024-01-01 00:00:00"
        rows = {
            "gh-issue": ("github", '{"issue": {"number": 7}, "repository": {"full_name": "o/r"}}'),
            "gh-pr": (
                "github",
                '{"number": 8, "pull_request": {"number": 8}, "repository": {"full_name": "o/r"}}',
            ),
            "jira": ("jira", '{"issue": {"key": "PB-3"}}'),
            "broken": ("github", "{not json"),
            "none": ("github", '{"zen": "hi"}'),
        }
        with engine.begin() as connection:
            for guid, (source, payload) in rows.items():
                connection.execute(
                    insert(old).values(
                        source=source,
                        event="e",
                        delivery_id=guid,
                        payload=payload,
                        headers="{}",
                        received_at=now,
                        status="done",
                        attempts=1,
                        next_attempt_at=now,
                    )
                )
    finally:
        db.upgrade(engine)
    assert db.current_revision(engine) == db.SCHEMA_HEAD
    with db.transaction(engine) as session:
        told = dict(session.execute(select(Delivery.delivery_id, Delivery.ticket_key)).all())
    assert told == {
        "gh-issue": "o/r#7",
        "gh-pr": "o/r#8",
        "jira": "PB-3",
        "broken": None,
        "none": None,
    }

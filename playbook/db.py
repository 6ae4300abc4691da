"""Engine and session factory, SQLite tuning, and Alembic migrations."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from functools import cache
from importlib.resources import files
from typing import TYPE_CHECKING, Any

from sqlalchemy import Connection, Engine, create_engine, event, exc, inspect, text
from sqlalchemy.engine import make_url
from sqlalchemy.orm import Session, sessionmaker
from sqlalchemy.sql.expression import Insert

from playbook.errors import DatabaseUnavailable

if TYPE_CHECKING:
    from alembic.config import Config

log = logging.getLogger(__name__)

# The newest migration in playbook/migrations/versions (a test keeps the two equal). Knowing
# it here lets every CLI run check the schema without importing Alembic, which is slow.
SCHEMA_HEAD = "0017"

# Connections each process keeps open to a database server.
POOL_SIZE = 16


def conflict_insert(bind: Engine | Connection | Session, table: Any) -> Insert:
    """An INSERT into ``table`` that can say ON CONFLICT, in ``bind``'s dialect.

    PostgreSQL and SQLite spell insert-if-absent and upserts the same way, but SQLAlchemy
    keeps each in its own dialect's ``insert``; every writer that needs one asks here.
    """
    name = (bind.get_bind() if isinstance(bind, Session) else bind).dialect.name
    # Imported here: the PostgreSQL dialect's module (asyncpg's types, JSON) takes tens of ms
    # that a command on SQLite need not pay.
    if name == "postgresql":
        from sqlalchemy.dialects import postgresql as dialect
    else:
        from sqlalchemy.dialects import sqlite as dialect
    return dialect.insert(table)  # type: ignore[return-value]


def make_engine(url: str) -> Engine:
    """Create an engine for ``url``, tuned for many threads and processes on one database."""
    try:
        parsed = make_url(url)
    except exc.ArgumentError:
        # The value itself is not echoed: a mistyped URL may still hold a password.
        raise DatabaseUnavailable(
            "PLAYBOOK_DATABASE_URL is not a database URL; "
            "use e.g. sqlite:///playbook.db or postgresql+psycopg://user@host/db"
        ) from None
    try:
        if parsed.get_backend_name() == "sqlite":
            return _sqlite_engine(url)
        # Keep a connection for every request thread (gunicorn gthread, the worker, the
        # scheduler): connections above pool_size are closed on return, and reopening one per
        # request costs a PostgreSQL backend fork each time.
        engine = create_engine(url, pool_size=POOL_SIZE, max_overflow=10)
        _ping_when_idle(engine)
        return engine
    except (exc.NoSuchModuleError, ModuleNotFoundError) as error:
        raise DatabaseUnavailable(
            f"no driver for {parsed.drivername!r} ({error}); for PostgreSQL install "
            "playbook-bot[postgres] and use postgresql+psycopg:// in PLAYBOOK_DATABASE_URL"
        ) from None


# A pooled connection idle for longer than this is checked before it is used again.
PING_AFTER_IDLE_SECONDS = 1.0


def _ping_when_idle(engine: Engine) -> None:
    """Check a pooled connection before use only when it has been idle a while.

    A server restart, a failover or a firewall closes connections that sit in the pool;
    `pool_pre_ping` would find them, but with a round trip before every transaction, several
    per webhook delivery. A connection handed back a moment ago is as good as checked.
    """

    @event.listens_for(engine, "checkin")
    def _checked_in(_dbapi_connection: Any, record: Any) -> None:
        record.info["idle_since"] = time.monotonic()

    @event.listens_for(engine, "checkout")
    def _checked_out(dbapi_connection: Any, record: Any, _proxy: Any) -> None:
        idle_since = record.info.get("idle_since")
        if idle_since is None or time.monotonic() - idle_since < PING_AFTER_IDLE_SECONDS:
            return
        try:
            cursor = dbapi_connection.cursor()
            try:
                cursor.execute("SELECT 1")
            finally:
                cursor.close()
            dbapi_connection.rollback()
        except Exception as error:
            # The pool discards this connection and checks out (or opens) another.
            raise exc.DisconnectionError(type(error).__name__) from None


def _sqlite_engine(url: str) -> Engine:
    # 30 s busy timeout: writers queue up instead of failing with "database is locked".
    engine = create_engine(url, connect_args={"timeout": 30, "check_same_thread": False})

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        # Take transaction control away from pysqlite so BEGIN IMMEDIATE below is ours.
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA foreign_keys=ON")
        if make_url(url).database not in (None, "", ":memory:"):
            # WAL lets readers run while one writer writes; other processes share the file.
            cursor.execute("PRAGMA journal_mode=WAL")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(connection: Any) -> None:
        # A deferred transaction that reads then writes can fail with SQLITE_BUSY without
        # waiting; taking the write lock up front makes concurrent writers simply queue.
        connection.exec_driver_sql("BEGIN IMMEDIATE")

    return engine


@cache
def _sessions(engine: Engine) -> sessionmaker[Session]:
    return sessionmaker(engine, expire_on_commit=False)


@contextmanager
def transaction(engine: Engine) -> Iterator[Session]:
    """Open a session whose work is committed on success and rolled back on error."""
    session = _sessions(engine)()
    try:
        yield session
        session.commit()
    except (exc.OperationalError, exc.InterfaceError) as error:
        _rollback(session)
        raise unavailable(engine, error) from None
    except BaseException:
        _rollback(session)
        raise
    finally:
        session.close()


# What a driver's connection error means, by words it contains; the rest of its message names
# the server, the port and the role, which must not travel into replies or logs.
_CAUSES = (
    ("password authentication failed", "password refused"),
    ("authentication failed", "authentication failed"),
    ("does not exist", "database or role does not exist"),
    ("connection refused", "connection refused"),
    ("timeout", "connection timed out"),
    ("timed out", "connection timed out"),
    ("could not translate host name", "host name does not resolve"),
    ("name or service not known", "host name does not resolve"),
    ("unable to open database file", "file cannot be opened"),
    ("readonly database", "file is read-only"),
    ("database is locked", "locked by another writer"),
    ("disk i/o error", "disk I/O error"),
    ("too many clients", "too many connections"),
    ("server closed the connection", "server closed the connection"),
)


def describe_error(error: Exception) -> str:
    """What went wrong with the database, in a few words that never name host, port or role."""
    text = str(getattr(error, "orig", error)).lower()
    for words, cause in _CAUSES:
        if words in text:
            return cause
    return type(getattr(error, "orig", error)).__name__


def _rollback(session: Session) -> None:
    # With the server gone the rollback fails too; the error worth raising is the first one.
    with suppress(exc.OperationalError, exc.InterfaceError):
        session.rollback()


def unavailable(engine: Engine, error: Exception) -> DatabaseUnavailable:
    """Turn a driver error into one sentence naming the setting to check, never the URL."""
    kind = {"postgresql": "PostgreSQL", "sqlite": "SQLite"}.get(engine.dialect.name, "")
    return DatabaseUnavailable(
        f"cannot use the database ({kind}: {describe_error(error)}); "
        "check PLAYBOOK_DATABASE_URL and that the database is up"
    )


def alembic_config(engine: Engine) -> Config:
    """An Alembic config pointing at the migrations shipped inside the package."""
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(files("playbook") / "migrations"))
    config.attributes["engine"] = engine
    return config


def head_revision(engine: Engine) -> str | None:
    """The newest migration this code knows, read from the migration scripts."""
    from alembic.script import ScriptDirectory

    return ScriptDirectory.from_config(alembic_config(engine)).get_current_head()


def current_revision(engine: Engine) -> str | None:
    """The migration the database is at, or None for an empty database."""
    try:
        with engine.connect() as connection:
            if not inspect(connection).has_table("alembic_version"):
                return None
            return connection.execute(text("SELECT version_num FROM alembic_version")).scalar()
    except exc.OperationalError as error:
        raise unavailable(engine, error) from None


def upgrade(engine: Engine, revision: str = "head") -> None:
    """Migrate the database schema to ``revision``."""
    from alembic import command

    try:
        command.upgrade(alembic_config(engine), revision)
    except exc.OperationalError as error:
        raise unavailable(engine, error) from None


def ensure_schema(engine: Engine) -> None:
    """Create or migrate an embedded SQLite schema; refuse a stale server schema.

    SQLite is the zero-setup default, so its first use creates the file's schema.
    A shared PostgreSQL database is migrated deliberately, by `playbook-bot db upgrade`,
    so that several processes never race to migrate it.
    """
    current, head = current_revision(engine), SCHEMA_HEAD
    if current == head:
        return
    if engine.dialect.name == "sqlite":
        upgrade(engine)
        log.info(
            "%s the playbook schema in %s",
            "created" if current is None else f"migrated from {current}",
            engine.url.database,
        )
        return
    state = "has no playbook schema" if current is None else f"is at schema {current}"
    raise DatabaseUnavailable(
        f"the database {state} but this version needs {head}; run `playbook-bot db upgrade`"
    )

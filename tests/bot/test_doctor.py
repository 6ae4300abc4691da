"""`playbook-bot doctor` on a fresh install, and a fix named by every failure it reports."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from sqlalchemy import Engine, create_engine, text
from sqlalchemy.engine import make_url

from playbook import db
from playbook.deliveries import heartbeats

# What a FAIL line tells a person to do: set, unset, run, check, install or point something.
FIXES = ("set ", "unset ", "run `", "check ", "install ", "point ")


def console() -> list[str]:
    script = Path(sys.executable).with_name("playbook-bot")
    return [str(script)] if script.exists() else [sys.executable, "-m", "bot"]


def failures(output: str) -> list[str]:
    return [line for line in output.splitlines() if line.startswith("[FAIL]")]


def test_a_fresh_sqlite_install_passes_before_the_first_serve(tmp_path: Path) -> None:
    # Only the database URL, in an empty directory: what a new user has before `serve`.
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path)}
    env["PLAYBOOK_DATABASE_URL"] = f"sqlite:///{tmp_path / 'p.db'}"
    done = subprocess.run(
        [*console(), "doctor"], cwd=tmp_path, env=env, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert failures(done.stdout) == []
    assert "[ok  ] database: sqlite database" in done.stdout
    assert "is new; its first use brings it to" in done.stdout
    assert "[--  ] worker: none has run yet; `playbook-bot serve` starts one" in done.stdout


def test_a_migrated_playbook_without_a_worker_is_not_a_failure(cli, engine: Engine) -> None:
    result = cli("doctor")
    assert result.exit_code == 0, result.output
    assert "[ok  ] database:" in result.output and f"at schema {db.SCHEMA_HEAD}" in result.output
    assert "[--  ] worker: no worker reported in the last 60 s" in result.output

    heartbeats.beat(engine, "w1", datetime.now(UTC))
    result = cli("doctor")
    assert "[ok  ] worker: 1 worker(s) reported in the last 60 s" in result.output


def test_an_older_sqlite_schema_is_migrated_on_first_use(
    cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = f"sqlite:///{tmp_path / 'old.db'}"
    old = db.make_engine(url)
    db.upgrade(old, "0001")
    old.dispose()
    monkeypatch.setenv("PLAYBOOK_DATABASE_URL", url)
    result = cli("doctor")
    assert result.exit_code == 0, result.output
    assert f"is at schema 0001; its first use brings it to {db.SCHEMA_HEAD}" in result.output


def test_every_failure_names_its_fix(cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A schema from a newer release, unsigned GitHub deliveries, an unreachable database.
    newer = f"sqlite:///{tmp_path / 'newer.db'}"
    engine = db.make_engine(newer)
    db.upgrade(engine)
    with engine.begin() as connection:
        connection.execute(text("UPDATE alembic_version SET version_num = '9999'"))
    engine.dispose()
    monkeypatch.setenv("PLAYBOOK_DATABASE_URL", newer)
    monkeypatch.setenv("PLAYBOOK_INSECURE_SKIP_VERIFY", "1")
    monkeypatch.delenv("GITHUB_WEBHOOK_SECRET", raising=False)
    result = cli("doctor")
    assert result.exit_code == 1
    found = failures(result.output)
    assert [line.split(":")[0] for line in found] == ["[FAIL] database", "[FAIL] GitHub webhook"]
    assert "newer than this playbook-bot knows" in found[0]

    monkeypatch.setenv("PLAYBOOK_DATABASE_URL", f"sqlite:///{tmp_path / 'no' / 'such' / 'p.db'}")
    result = cli("doctor")
    found += failures(result.output)
    assert "PLAYBOOK_DATABASE_URL" in found[-2]
    for line in found:
        assert any(fix in line for fix in FIXES), line


@pytest.fixture
def empty_schema(database_url: str) -> Iterator[str]:
    """A PostgreSQL schema with no tables: a server database nobody has migrated yet."""
    if not database_url.startswith("postgresql"):
        pytest.skip("a server schema is migrated deliberately; SQLite migrates itself")
    server = make_url(database_url).difference_update_query(["options"])
    schema = f"pbdoctor_{uuid.uuid4().hex[:12]}"
    admin = create_engine(server)
    with admin.begin() as connection:
        connection.execute(text(f'CREATE SCHEMA "{schema}"'))
    try:
        yield server.update_query_dict({"options": f"-csearch_path={schema}"}).render_as_string(
            hide_password=False
        )
    finally:
        with admin.begin() as connection:
            connection.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))
        admin.dispose()


def test_an_unmigrated_server_database_fails_with_the_command_to_run(
    cli, empty_schema: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PLAYBOOK_DATABASE_URL", empty_schema)
    result = cli("doctor")
    assert result.exit_code == 1
    needs = f"schema is empty, needs {db.SCHEMA_HEAD}: run `playbook-bot db upgrade`"
    assert f"[FAIL] database: {needs}" in result.output
    assert "worker" not in result.output

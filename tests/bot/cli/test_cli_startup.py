"""CLI start-up: `--help` and the everyday commands import only what they use (no statistics,
model, web, tracker or scanner library), and the lazy table is true."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import click
import pytest

from bot.cli import COMMANDS, main
from playbook import db
from playbook.lessons import lifecycle

HEAVY = ("sqlalchemy", "pydantic", "flask", "github", "jira", "numpy", "apscheduler")
# What none of the everyday commands uses, each a tenth of a second to a second to import:
# loaded only by the commands, handlers and pages that need them.
LIBRARIES = (
    "scipy",
    "statsmodels",
    "pandas",
    "sklearn",
    "openai",
    "onnxruntime",
    "usearch",
    "detect_secrets",
    "gevent",
    "mcp",
    "flask",
    "flask_openapi3",
    "werkzeug",
    "waitress",
    "github",
    "jira",
    "requests",
    "prometheus_client",
    "apscheduler",
    "markdown_it",
)

PROBE = """
import json, sys
from bot.cli import main
code = 0
try:
    main(sys.argv[1:], prog_name="playbook-bot")
except SystemExit as exit:
    code = exit.code
loaded = sorted(name for name in {heavy!r} if name in sys.modules)
print(json.dumps({{"loaded": loaded, "code": code}}), file=sys.stderr)
"""


def imported_by(args: list[str], tmp_path: Path, packages: tuple[str, ...] = HEAVY) -> list[str]:
    """The ``packages`` a fresh process has imported after running the CLI with ``args``."""
    env = {"PLAYBOOK_DATABASE_URL": f"sqlite:///{tmp_path / 'playbook.db'}", "PATH": "/usr/bin"}
    done = subprocess.run(
        [sys.executable, "-c", PROBE.format(heavy=packages), *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    found = json.loads(done.stderr.strip().splitlines()[-1])
    assert found["code"] in (0, None), done.stderr  # the command itself worked
    return found["loaded"]


@pytest.mark.slow
def test_help_lists_every_command_without_importing_any_library(tmp_path: Path) -> None:
    assert imported_by(["--help"], tmp_path) == []


@pytest.mark.slow
def test_search_does_not_import_the_web_or_tracker_clients(tmp_path: Path) -> None:
    loaded = imported_by(["search", "broker fails to restart"], tmp_path)
    assert "sqlalchemy" in loaded  # it did search
    assert not {"flask", "github", "jira"} & set(loaded)


@pytest.fixture(scope="module")
def playbook_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder whose playbook.db holds a few lessons, pb-1 among them."""
    folder = tmp_path_factory.mktemp("startup")
    engine = db.make_engine(f"sqlite:///{folder / 'playbook.db'}")
    db.ensure_schema(engine)
    with db.transaction(engine) as session:
        for n, text in enumerate(("Retry webhooks with an idempotency key", "Pin chromium in CI")):
            lifecycle.add(session, text, learned_from=f"CTMS-{n}", actor="t", status="active")
    engine.dispose()
    return folder


@pytest.mark.parametrize(
    "args",
    [
        ["--help"],
        ["list", "--status", "proposed"],
        ["list", "--json"],
        ["show", "pb-1"],
        ["show", "pb-1", "--json"],
        ["add", "Rotate the staging keys after each drill", "--learned-from", "CTMS-9"],
        ["search", "webhook retries fail with a timeout"],
        ["search", "webhook retries", "--json", "--explain"],
    ],
    ids=" ".join,
)
@pytest.mark.slow
def test_everyday_commands_import_no_library_they_do_not_use(
    args: list[str], playbook_folder: Path
) -> None:
    """Each of these answered in seconds while scipy, statsmodels or the secret scanner loaded
    with it: a library named here may be imported only by the commands that use it."""
    loaded = imported_by(args, playbook_folder, (*LIBRARIES, "sqlalchemy"))
    assert ("sqlalchemy" in loaded) == (args != ["--help"])  # the command ran
    assert [name for name in loaded if name != "sqlalchemy"] == []


def test_the_lazy_table_names_every_command_with_its_own_help() -> None:
    ctx = click.Context(main)
    for name, (_, _, short) in COMMANDS.items():
        command = main.get_command(ctx, name)
        assert command is not None, name
        assert command.get_short_help_str(limit=300) == short, name
    assert main.list_commands(ctx) == sorted(COMMANDS)


# A worker loads every handler; none may bring what only a rare job or a command uses.
WORKER_FREE_OF = ("scipy", "statsmodels", "pandas", "sklearn", "openai", "onnxruntime", "usearch")


@pytest.mark.slow
@pytest.mark.parametrize("module", ["bot.handlers", "bot.worker", "bot.scheduler"])
def test_the_worker_and_its_handlers_import_no_statistics_or_model_library(module: str) -> None:
    probe = (
        f"import sys, {module}; print(sorted(n for n in {WORKER_FREE_OF!r} if n in sys.modules))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=120
    )
    assert done.stdout.strip() == "[]"

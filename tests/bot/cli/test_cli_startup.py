"""CLI start-up: `--help` and `search` import only what they use, and the lazy table is true."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import click

from bot.cli import COMMANDS, main

HEAVY = ("sqlalchemy", "pydantic", "flask", "github", "jira", "numpy", "apscheduler")

PROBE = """
import json, sys
from bot.cli import main
try:
    main(sys.argv[1:], prog_name="playbook-bot")
except SystemExit:
    pass
print(json.dumps(sorted(name for name in {heavy!r} if name in sys.modules)), file=sys.stderr)
"""


def imported_by(args: list[str], tmp_path: Path) -> list[str]:
    """The heavy packages a fresh process has imported after running the CLI with ``args``."""
    env = {"PLAYBOOK_DATABASE_URL": f"sqlite:///{tmp_path / 'playbook.db'}", "PATH": "/usr/bin"}
    done = subprocess.run(
        [sys.executable, "-c", PROBE.format(heavy=HEAVY), *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    return json.loads(done.stderr.strip().splitlines()[-1])


def test_help_lists_every_command_without_importing_any_library(tmp_path: Path) -> None:
    assert imported_by(["--help"], tmp_path) == []


def test_search_does_not_import_the_web_or_tracker_clients(tmp_path: Path) -> None:
    loaded = imported_by(["search", "broker fails to restart"], tmp_path)
    assert "sqlalchemy" in loaded  # it did search
    assert not {"flask", "github", "jira"} & set(loaded)


def test_the_lazy_table_names_every_command_with_its_own_help() -> None:
    ctx = click.Context(main)
    for name, (_, _, short) in COMMANDS.items():
        command = main.get_command(ctx, name)
        assert command is not None, name
        assert command.get_short_help_str(limit=300) == short, name
    assert main.list_commands(ctx) == sorted(COMMANDS)

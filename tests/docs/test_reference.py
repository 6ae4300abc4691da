"""The reference pages of docs/reference/ are what the code says today."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]
GENERATOR = ROOT / "docs" / "gen" / "reference.py"


@pytest.fixture(scope="module")
def reference() -> ModuleType:
    """docs/gen/reference.py, loaded as the script it is."""
    spec = importlib.util.spec_from_file_location("docs_reference", GENERATOR)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def generated(reference: ModuleType) -> dict[str, str]:
    return reference.pages()


def test_committed_pages_are_what_the_code_generates() -> None:
    """A setting, command, option, route, tool or key changed without rerunning the generator
    fails here, naming the pages and the command that brings them up to date.

    The generator runs in its own interpreter, exactly as a developer runs it."""
    checked = subprocess.run(
        [sys.executable, str(GENERATOR), "--check"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr[-2000:]


def test_every_setting_is_explained(generated: dict[str, str]) -> None:
    """Each environment setting has a section, and none leaks a secret's default."""
    from bot.config import Settings

    page = generated["settings.md"]
    for field in Settings.model_fields.values():
        assert f"## `{field.validation_alias}`" in page
    assert "sqlite:///playbook.db" in page  # an ordinary default is shown
    assert "**Default:** `1000000`" in page  # PLAYBOOK_MODEL_DAILY_TOKENS is a budget


def test_no_secret_has_its_default_printed(reference: ModuleType) -> None:
    """Even a secret given a default in the code (as a test or a fork might) stays off the page."""
    from pydantic import SecretStr
    from pydantic.fields import FieldInfo

    settings_page = reference.settings_page  # as the generator imported it

    for name in (
        "GITHUB_WEBHOOK_SECRET",
        "PLAYBOOK_API_TOKEN",
        "PLAYBOOK_MODEL_API_KEY",
        "JIRA_PAT",
    ):
        shown = settings_page.default_text(name, FieldInfo(default="hunter2-secret"))
        assert "hunter2" not in shown
    salt = FieldInfo(default=SecretStr("hunter2-salt"))
    assert "hunter2" not in settings_page.default_text("PLAYBOOK_EXPERIMENT_SALT", salt)


def test_every_command_and_option_is_listed(generated: dict[str, str]) -> None:
    """Every command, subcommand and option click knows is on the page."""
    import click

    from bot.cli import main

    page = generated["cli.md"]

    def walk(command: click.Command, ctx: click.Context) -> None:
        assert f"`{ctx.command_path}`" in page
        for param in command.get_params(ctx):
            for opt in param.opts if isinstance(param, click.Option) else ():
                if opt != "--help":
                    assert f"`{opt}`" in page, f"{ctx.command_path} {opt}"
        if isinstance(command, click.Group):
            for name in command.list_commands(ctx):
                sub = command.get_command(ctx, name)
                assert sub is not None
                walk(sub, click.Context(sub, info_name=name, parent=ctx))

    walk(main, click.Context(main, info_name="playbook-bot"))


def test_every_api_operation_and_mcp_tool_is_listed(generated: dict[str, str]) -> None:
    """Each route of the OpenAPI document and each MCP tool has its section."""
    import json

    spec = json.loads(generated["openapi.json"])
    for path, item in spec["paths"].items():
        for method in item:
            if method in {"get", "post", "put", "patch", "delete"}:
                assert f"`{method.upper()} {path}`" in generated["api.md"]
    for tool in ("search_lessons", "get_lesson", "record_usage", "propose_lesson"):
        assert f"### `{tool}`" in generated["mcp.md"]


def test_the_command_table_names_every_command() -> None:
    """docs/cli.md's hand-written tour names each top-level command (it once lacked four)."""
    from bot.cli import COMMANDS

    table = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    missing = [name for name in COMMANDS if f"`{name}" not in table]
    assert not missing, f"docs/cli.md's table lacks {missing}"

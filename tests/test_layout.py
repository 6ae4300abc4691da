"""The layout rules: the domain imports no edge, and bot never imports the web edge."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]


def _imports(package: str) -> dict[str, set[str]]:
    """Each module of ``package`` with the top-level packages it imports (lazily or not)."""
    found: dict[str, set[str]] = {}
    for path in sorted((ROOT / package).rglob("*.py")):
        names: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names.add(node.module.split(".")[0])
            elif isinstance(node, ast.Import):
                names.update(alias.name.split(".")[0] for alias in node.names)
        found[str(path.relative_to(ROOT))] = names
    return found


@pytest.mark.parametrize(
    ("package", "forbidden"),
    [
        # The domain: no web framework, no GitHub or Jira client, nothing of the layers above.
        ("playbook", {"flask", "github", "jira", "bot", "webhooks", "prometheus_client"}),
        # The web edge depends on bot; bot names it where it must run it (serve, demo).
        ("bot", {"webhooks"}),
    ],
)
def test_layers_import_only_downwards(package: str, forbidden: set[str]) -> None:
    offending = {
        module: sorted(names & forbidden)
        for module, names in _imports(package).items()
        if names & forbidden
    }
    assert offending == {}


def test_handlers_reach_github_and_jira_only_through_effects() -> None:
    for module, names in _imports("bot/handlers").items():
        assert not names & {"github", "jira"}, module


def test_bot_asks_the_domain_instead_of_querying_tables() -> None:
    builders = {"select", "insert", "update", "delete", "text"}
    for path in sorted((ROOT / "bot").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("sqlalchemy"):
                used = {alias.name for alias in node.names} & builders
                assert not used, f"{path.relative_to(ROOT)} imports {sorted(used)}"
            if isinstance(node, ast.Attribute) and node.attr == "add":
                owner = node.value
                assert not (isinstance(owner, ast.Name) and owner.id == "session"), (
                    f"{path.relative_to(ROOT)}:{node.lineno} adds rows itself"
                )

"""The layout rules: imports go one way (playbook <- bot <- webhooks), with no circle.

The domain imports no edge; bot never imports the web edge except in bot/cli, the composition
root that starts the web edge and the worker. Every import counts: at the top, inside a
function, under TYPE_CHECKING, relative, and ``importlib.import_module("<literal>")``.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]
PACKAGES = ("playbook", "bot", "webhooks")
# Generated Alembic revisions: not part of the import graph nor of the size rule.
EXCLUDED = ("playbook/migrations/versions/",)
MIGRATIONS = "playbook/migrations/"
MAX_LINES = 600
# The composition root: the one part of bot allowed to import the web edge.
COMPOSITION_ROOT = "bot.cli"
# Modules allowed to call import_module with a name computed at run time (none).
DYNAMIC_IMPORTS: frozenset[str] = frozenset()
# Private members of the jira and PyGithub clients: bot uses their public API only.
CLIENT_PRIVATES = frozenset(
    {
        "_get_json",
        "_get_url",
        "_session",
        "_rawData",
        "_requester",
        "_Github__requester",
        "_options",
        "_headers",
        "_completeIfNotSet",
        "_useAttributes",
        "_initAttributes",
        "_makeStringAttribute",
        "_resource",
        "_base_url",
        "_parse_raw",
        "_find_for_resource",
        "_fetch_pages",
        "_get_items_from_page",
        "_timestamp",
    }
)


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
    ("package", "forbidden", "exempt"),
    [
        # The domain: no web framework, no GitHub or Jira client, nothing of the layers above.
        ("playbook", {"flask", "github", "jira", "bot", "webhooks", "prometheus_client"}, None),
        # The web edge depends on bot; only the CLI (the composition root) imports it.
        ("bot", {"webhooks"}, "bot/cli/"),
    ],
)
def test_layers_import_only_downwards(
    package: str, forbidden: set[str], exempt: str | None
) -> None:
    offending = {
        module: sorted(names & forbidden)
        for module, names in _imports(package).items()
        if names & forbidden and not (exempt and module.startswith(exempt))
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


# The module graph: every import of every module of playbook/, bot/ and webhooks/.


@dataclass(frozen=True)
class Import:
    """One import statement (or import_module call) of a project module."""

    source: str  # the importing module
    target: str  # the imported project module (the submodule when ``from pkg import mod``)
    line: int


# The files, their syntax trees and the graph are built on first use, not at import: every
# pytest run collects this module, and only the runs that take its tests need them.
@cache
def _files() -> dict[str, Path]:
    """Each project module's dotted name and file, generated migrations left out."""
    found: dict[str, Path] = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            relative = path.relative_to(ROOT).as_posix()
            if relative.startswith(EXCLUDED):
                continue
            parts = relative.removesuffix(".py").split("/")
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


@cache
def _trees() -> dict[str, ast.Module]:
    """Each project module's syntax tree."""
    return {
        module: ast.parse(path.read_text(encoding="utf-8")) for module, path in _files().items()
    }


def _where(module: str, line: int | None = None) -> str:
    where = _files()[module].relative_to(ROOT).as_posix()
    return f"{where}:{line}" if line else where


def _project(name: str) -> str | None:
    """The project module ``name`` names, or its nearest enclosing one (None: not ours)."""
    while name:
        if name in _files():
            return name
        name = name.rpartition(".")[0]
    return None


def _is_import_module(call: ast.Call) -> bool:
    func = call.func
    return (isinstance(func, ast.Name) and func.id in {"import_module", "__import__"}) or (
        isinstance(func, ast.Attribute) and func.attr == "import_module"
    )


def _imported_names(module: str) -> Iterator[tuple[str, int]]:
    """Every dotted name ``module`` imports, with the line, however it imports it."""
    package = module if _files()[module].name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(_trees()[module]):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node.lineno
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, *([base] if base else [])])
            for alias in node.names:
                # `from pkg import mod` imports the submodule; `from pkg import name`, pkg.
                submodule = f"{base}.{alias.name}"
                yield (submodule if submodule in _files() else base), node.lineno
        elif isinstance(node, ast.Call) and _is_import_module(node) and node.args:
            name = node.args[0]
            if isinstance(name, ast.Constant) and isinstance(name.value, str):
                yield name.value, node.lineno


@cache
def _graph() -> list[Import]:
    """Each (module, project module it imports) once, at its first import's line."""
    edges: dict[tuple[str, str], Import] = {}
    for module in _files():
        for name, line in _imported_names(module):
            target = _project(name)
            if target and target != module and (module, target) not in edges:
                edges[module, target] = Import(module, target, line)
    return sorted(edges.values(), key=lambda edge: (edge.source, edge.line, edge.target))


def _components(edges: list[Import]) -> list[list[str]]:
    """The strongly connected components of the graph (Tarjan), each sorted."""
    after: dict[str, list[str]] = {module: [] for module in _files()}
    for edge in edges:
        after[edge.source].append(edge.target)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for target in after[module]:
            if target not in index:
                visit(target)
                low[module] = min(low[module], low[target])
            elif target in on_stack:
                low[module] = min(low[module], index[target])
        if low[module] == index[module]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == module:
                    break
            found.append(sorted(component))

    for module in sorted(_files()):
        if module not in index:
            visit(module)
    return found


def _cycle(component: list[str], edges: list[Import]) -> list[Import]:
    """One shortest circle through the first module of ``component``, as its imports."""
    members = set(component)
    start = component[0]
    outgoing: dict[str, list[Import]] = {}
    for edge in edges:
        if edge.source in members and edge.target in members:
            outgoing.setdefault(edge.source, []).append(edge)
    paths: dict[str, list[Import]] = {start: []}
    frontier = [start]
    while frontier:
        reached = []
        for module in frontier:
            for edge in outgoing.get(module, []):
                if edge.target == start:
                    return [*paths[module], edge]
                if edge.target not in paths:
                    paths[edge.target] = [*paths[module], edge]
                    reached.append(edge.target)
        frontier = reached
    raise AssertionError(f"no circle through {start}")  # a component always has one


def _describe(component: list[str]) -> str:
    circle = _cycle(component, _graph())
    path = " -> ".join([circle[0].source, *(edge.target for edge in circle)])
    steps = "\n".join(
        f"    {_where(edge.source, edge.line)} imports {edge.target}" for edge in circle
    )
    return f"circle of {len(component)} modules {component}:\n  {path}\n{steps}"


def test_the_graph_sees_lazy_relative_and_named_imports() -> None:
    edges = {(edge.source, edge.target) for edge in _graph()}
    # Inside a function, and a package's __init__ re-exporting a submodule's name.
    assert ("webhooks.app", "webhooks.api") in edges
    assert ("webhooks", "webhooks.app") in edges
    # `from bot.cli import bullets` is the submodule, not the package.
    assert ("bot.cli", "bot.cli.bullets") in edges
    assert ("bot.cli", "bot.cli.base") in edges


def test_no_import_circle() -> None:
    circles = [component for component in _components(_graph()) if len(component) > 1]
    assert not circles, "import circles:\n" + "\n".join(map(_describe, circles))


def test_imports_go_one_way() -> None:
    # playbook <- bot <- webhooks; bot/cli, the composition root, may import webhooks.
    layer = {package: rank for rank, package in enumerate(PACKAGES)}
    offending = [
        f"{_where(edge.source, edge.line)} imports {edge.target}"
        for edge in _graph()
        if layer[edge.source.split(".")[0]] < layer[edge.target.split(".")[0]]
        and not (
            f"{edge.source}.".startswith(f"{COMPOSITION_ROOT}.")
            and edge.target.split(".")[0] == "webhooks"
        )
    ]
    assert not offending, "imports against the layers:\n" + "\n".join(offending)


def test_only_the_composition_imports_the_app_factory() -> None:
    # The views share webhooks.runtime; the factory is imported by what builds and runs the
    # app (and re-exported by the package for `from webhooks import create_app`).
    builders = {"webhooks", "webhooks.wsgi", "webhooks.server", "webhooks.demo"}
    offending = [
        f"{_where(edge.source, edge.line)} imports webhooks.app"
        for edge in _graph()
        if edge.target == "webhooks.app"
        and edge.source not in builders
        and not f"{edge.source}.".startswith(f"{COMPOSITION_ROOT}.")
    ]
    assert not offending, "the app factory imported by a view:\n" + "\n".join(offending)


def test_no_import_by_a_name_computed_at_run_time() -> None:
    offending = [
        f"{_where(module, node.lineno)} calls {ast.unparse(node)}"
        for module, tree in _trees().items()
        if module not in DYNAMIC_IMPORTS
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and _is_import_module(node)
        and not (
            node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        )
    ]
    assert not offending, "imports by a computed name:\n" + "\n".join(offending)


def test_no_module_is_over_the_size_limit() -> None:
    # Every Python file of the repository, tests and benches too; only migrations are exempt.
    sizes = {
        path.relative_to(ROOT).as_posix(): len(path.read_text(encoding="utf-8").splitlines())
        for folder in (*PACKAGES, "tests", "bench")
        for path in sorted((ROOT / folder).rglob("*.py"))
        if not path.relative_to(ROOT).as_posix().startswith(MIGRATIONS)
    }
    offending = [
        f"{path}: {lines} lines" for path, lines in sorted(sizes.items()) if lines > MAX_LINES
    ]
    assert not offending, f"modules over {MAX_LINES} lines:\n" + "\n".join(offending)


def test_bot_uses_no_private_member_of_the_jira_or_github_clients() -> None:
    offending: list[tuple[int, str]] = []
    for module, tree in _trees().items():
        if module.split(".")[0] != "bot":
            continue
        for node in ast.walk(tree):
            name = None
            if isinstance(node, ast.Attribute):
                name = node.attr
            elif (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id in {"getattr", "setattr", "hasattr", "delattr"}
                and len(node.args) > 1
                and isinstance(node.args[1], ast.Constant)
            ):
                name = node.args[1].value
            if name in CLIENT_PRIVATES:
                offending.append((node.lineno, f"{_where(module, node.lineno)} uses .{name}"))
    assert not offending, "private members of the jira/PyGithub clients:\n" + "\n".join(offending)

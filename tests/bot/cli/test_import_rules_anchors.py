"""`import-rules` anchors the lessons it imports: an `.mdc`'s globs, a nested AGENTS.md's folder,
Copilot's applyTo and Claude Code's paths; the bot's own path-scoped files are never read."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.bot.cli.fake_github import TOKEN, fake_github
from tests.loop_harness import REPO

ORDERS_MDC = """---
description: Orders and their locks
globs: orders/**/*.py, ../secrets/*.env
alwaysApply: false
---

- Take the orders row lock once per transaction
"""
LIST_MDC = """---
description: Web handlers
globs:
  - "web/handlers/**"
  - "web/routes.py"
---

- Return 404 for a missing order, never 500
"""
ALWAYS_MDC = """---
description: Everywhere
globs: src/**
alwaysApply: true
---

- Write commit messages in the imperative mood
"""
BOTS_OWN = """---
description: Lessons learned by playbook-bot
globs: orders/**
---

- A lesson the playbook already has, written out by its sync
"""
PAYMENTS = "# Payments\n\n## Rules\n\n- Idempotency keys on every payment call\n"
ROOT = "# Agents\n\n## Rules\n\n- Run the whole test suite before you push\n"


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    rules = root / ".cursor" / "rules"
    rules.mkdir(parents=True)
    (rules / "orders.mdc").write_text(ORDERS_MDC)
    (rules / "web.mdc").write_text(LIST_MDC)
    (rules / "always.mdc").write_text(ALWAYS_MDC)
    (rules / "playbook-orders.mdc").write_text(BOTS_OWN)
    (root / "services" / "payments").mkdir(parents=True)
    (root / "services" / "payments" / "AGENTS.md").write_text(PAYMENTS)
    (root / "AGENTS.md").write_text(ROOT)
    return root


def by_text(cli) -> dict[str, dict]:
    return {row["text"]: row for row in json.loads(cli("list", "--json", "--status", "all").stdout)}


def test_imported_lessons_carry_their_files_anchors(cli, checkout: Path) -> None:
    result = cli("import-rules", "repo")
    assert result.exit_code == 0, result.output
    rows = by_text(cli)
    assert rows["Take the orders row lock once per transaction"]["paths"] == ["orders/**/*.py"]
    assert rows["Return 404 for a missing order, never 500"]["paths"] == [
        "web/handlers/**",
        "web/routes.py",
    ]
    assert rows["Idempotency keys on every payment call"]["paths"] == ["services/payments/**"]
    assert rows["Run the whole test suite before you push"]["paths"] is None
    assert rows["Write commit messages in the imperative mood"]["paths"] is None  # alwaysApply
    # The bot's own file is no source, and the refused glob is named, never a traceback.
    assert "A lesson the playbook already has, written out by its sync" not in rows
    assert "playbook-orders" not in result.output
    assert (
        "repo/.cursor/rules/orders.mdc: glob not used as an anchor: "
        "'../secrets/*.env' has a '..' segment; name a path inside the repository"
    ) in result.stderr.splitlines()
    assert (
        "repo/services/payments/AGENTS.md: its lessons are anchored to services/payments/**"
        in result.stderr.splitlines()
    )
    # Visible where a maintainer looks: show and the lesson's history.
    lesson = rows["Idempotency keys on every payment call"]["id"]
    assert "paths:        services/payments/**" in cli("show", lesson).stdout
    [created] = json.loads(cli("history", lesson, "--json").stdout)
    assert created["after"]["paths"] == ["services/payments/**"]


def test_the_json_report_names_each_files_anchors(cli, checkout: Path) -> None:
    result = cli("import-rules", "repo", "--json", "--dry-run")
    files = {one["name"]: one for one in json.loads(result.stdout)["files"]}
    assert files["repo/.cursor/rules/orders.mdc"]["paths"] == ["orders/**/*.py"]
    assert files["repo/.cursor/rules/orders.mdc"]["notes"] == [
        "glob not used as an anchor: '../secrets/*.env' has a '..' segment; "
        "name a path inside the repository"
    ]
    assert files["repo/AGENTS.md"]["paths"] is None
    assert "repo/.cursor/rules/playbook-orders.mdc" not in files


def test_a_nested_agents_md_named_directly_is_placed_by_its_git_checkout(
    cli, checkout: Path
) -> None:
    (checkout / ".git").mkdir()
    result = cli("import-rules", "repo/services/payments/AGENTS.md")
    assert result.exit_code == 0, result.output
    assert by_text(cli)["Idempotency keys on every payment call"]["paths"] == [
        "services/payments/**"
    ]


def test_the_bots_own_file_named_directly_is_refused_in_one_line(cli, checkout: Path) -> None:
    result = cli("import-rules", "repo/.cursor/rules/playbook-orders.mdc")
    assert result.exit_code != 0
    assert result.stderr.splitlines() == [
        "error: repo/.cursor/rules/playbook-orders.mdc is the bot's own rule file: "
        "its lessons are the playbook's"
    ]


def test_repo_imports_anchor_from_the_mdc_globs_and_skip_the_bots_own(cli, monkeypatch) -> None:
    with fake_github(monkeypatch) as github:
        github.put_file(REPO, "AGENTS.md", ROOT.encode())
        github.put_file(REPO, ".cursor/rules/orders.mdc", ORDERS_MDC.encode())
        github.put_file(REPO, ".cursor/rules/playbook-orders.mdc", BOTS_OWN.encode())
        monkeypatch.setenv("GITHUB_TOKEN", TOKEN)
        result = cli("import-rules", "--repo", REPO)
    assert result.exit_code == 0, result.output
    rows = by_text(cli)
    assert rows["Take the orders row lock once per transaction"]["paths"] == ["orders/**/*.py"]
    assert rows["Run the whole test suite before you push"]["paths"] is None
    assert "A lesson the playbook already has, written out by its sync" not in rows


# Copilot's path-specific instructions and Claude Code's path-scoped rules, as their docs show.
COPILOT = """---
applyTo: "**/*.py,scripts/*.sh"
---

- Type every public function; run mypy before you push
"""
CLAUDE_RULE = """---
paths:
  - "src/api/**/*.{ts,tsx}"
---

# API rules

- Validate every request body with the shared schema
"""


def scoped_checkout(root: Path) -> None:
    (root / ".github" / "instructions" / "backend").mkdir(parents=True)
    (root / ".github" / "instructions" / "backend" / "python.instructions.md").write_text(COPILOT)
    (root / ".github" / "instructions" / "playbook-orders.instructions.md").write_text(BOTS_OWN)
    (root / ".claude" / "rules").mkdir(parents=True)
    (root / ".claude" / "rules" / "api.md").write_text(CLAUDE_RULE)
    (root / ".claude" / "rules" / "playbook-orders.md").write_text(BOTS_OWN)


def test_copilot_instructions_and_claude_rules_are_read_and_anchored(cli, checkout: Path) -> None:
    scoped_checkout(checkout)
    result = cli("import-rules", "repo")
    assert result.exit_code == 0, result.output
    rows = by_text(cli)
    assert rows["Type every public function; run mypy before you push"]["paths"] == [
        "**/*.py",
        "scripts/*.sh",
    ]
    assert rows["Validate every request body with the shared schema"]["paths"] == [
        "src/api/**/*.ts",
        "src/api/**/*.tsx",
    ]
    assert "A lesson the playbook already has, written out by its sync" not in rows
    # Each folder can be imported on its own too.
    again = cli("import-rules", "repo/.claude/rules", "--dry-run")
    assert again.stdout.splitlines()[-1].startswith("would add 0 lessons (proposed) from 1 file")


def test_repo_imports_read_the_path_scoped_folders(cli, monkeypatch) -> None:
    with fake_github(monkeypatch) as github:
        github.put_file(REPO, "AGENTS.md", ROOT.encode())
        files = {
            ".github/instructions/backend/python.instructions.md": COPILOT,
            ".github/instructions/playbook-orders.instructions.md": BOTS_OWN,
            ".claude/rules/api.md": CLAUDE_RULE,
            ".claude/rules/playbook-orders.md": BOTS_OWN,
        }
        for path, text in files.items():
            github.put_file(REPO, path, text.encode())
        monkeypatch.setenv("GITHUB_TOKEN", TOKEN)
        result = cli("import-rules", "--repo", REPO)
    assert result.exit_code == 0, result.output
    rows = by_text(cli)
    assert rows["Type every public function; run mypy before you push"]["paths"] == [
        "**/*.py",
        "scripts/*.sh",
    ]
    assert rows["Validate every request body with the shared schema"]["paths"] == [
        "src/api/**/*.ts",
        "src/api/**/*.tsx",
    ]
    assert "A lesson the playbook already has, written out by its sync" not in rows

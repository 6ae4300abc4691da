"""The `playbook-bot` command line: one group whose commands load from small modules on use."""

from __future__ import annotations

from bot.cli.base import main

# name -> (module, attribute, short help). A command's module is imported when the command
# runs or shows its own help, so `playbook-bot --help` starts in a fraction of a second and
# `search` never imports Flask, PyGithub or jira. A test keeps the helps equal to the commands'.
COMMANDS: dict[str, tuple[str, str, str]] = {
    "add": (
        "bot.cli.bullets",
        "add",
        "Add a lesson and print its id (or the id of the near-duplicate that already exists).",
    ),
    "approve": ("bot.cli.bullets", "approve", "Make a proposed bullet active."),
    "archive": (
        "bot.cli.bullets",
        "archive",
        "Archive a bullet (kept, not retrieved; `restore` undoes it).",
    ),
    "backfill": (
        "bot.cli.loop",
        "backfill",
        "Apply closed pull requests from the API (links, lessons, cites, outcomes).",
    ),
    "db": ("bot.cli.database", "db_group", "Manage the database schema."),
    "deliveries": (
        "bot.cli.deliveries",
        "deliveries_group",
        "Inspect and replay webhook deliveries.",
    ),
    "demo": (
        "bot.cli.reports",
        "demo",
        "Run the whole loop on a temporary playbook, with no credentials and no network.",
    ),
    "deprecate": (
        "bot.cli.bullets",
        "deprecate",
        "Soft-deprecate a bullet (kept, not retrieved; `restore` undoes it).",
    ),
    "doctor": (
        "bot.cli.loop",
        "doctor",
        "Check every configured connection and say what works and what to fix.",
    ),
    "edit": (
        "bot.cli.bullets",
        "edit",
        "Change a bullet's text, tags, section, scope or provenance.",
    ),
    "export": (
        "bot.cli.transfer",
        "export",
        "Export the playbook (or its usage log) to stdout or a file, written as it is read.",
    ),
    "history": (
        "bot.cli.bullets",
        "history",
        "Every change made to a bullet: who, when, why, before and after.",
    ),
    "import": (
        "bot.cli.transfer",
        "import_",
        "Import bullets (YAML, JSONL, CSV) or a .lesson-usage.jsonl usage log.",
    ),
    "list": ("bot.cli.bullets", "list_", "List bullets."),
    "mcp": (
        "bot.cli.mcp",
        "mcp",
        "Serve the playbook to a local agent over MCP (stdio).",
    ),
    "prune": (
        "bot.cli.maintenance",
        "prune",
        "Archive active lessons nobody loaded or cited for --idle-days (dry run by default).",
    ),
    "purge": (
        "bot.cli.maintenance",
        "purge",
        "Delete finished webhook deliveries, side-effect and retrieval logs older than a span.",
    ),
    "reconcile": (
        "bot.cli.maintenance",
        "reconcile",
        "Ask GitHub to redeliver failed App webhook deliveries that never reached the inbox.",
    ),
    "restore": (
        "bot.cli.bullets",
        "restore",
        "Make a deprecated or archived bullet active again.",
    ),
    "revert": (
        "bot.cli.bullets",
        "revert",
        "Undo one revision of a bullet (see `history`); the undo is itself a revision.",
    ),
    "search": (
        "bot.cli.search",
        "search",
        "Rank the active lessons for a ticket's text (first line = summary).",
    ),
    "serve": (
        "bot.cli.service",
        "serve",
        "Serve the webhook endpoints and process deliveries in the same process.",
    ),
    "show": ("bot.cli.bullets", "show", "Show one bullet with its usage counters and history."),
    "stats": (
        "bot.cli.reports",
        "stats",
        "How the playbook is doing: bullets, usage, coverage, best and worst lessons.",
    ),
    "usage": (
        "bot.cli.usage",
        "usage_group",
        "Record loads and cites, and check the counters against the event log.",
    ),
    "worker": (
        "bot.cli.service",
        "worker",
        "Process inbox deliveries (run beside gunicorn in production).",
    ),
}
main.lazy.update(COMMANDS)

__all__ = ["COMMANDS", "main"]

"""The `playbook-bot` command line: one group whose commands load from small modules on use."""

from __future__ import annotations

from types import ModuleType

from bot.cli.base import Lazy, main


# One loader per command module, each an ordinary import run when a command of that module
# runs or shows its own help: `playbook-bot --help` starts in a fraction of a second and
# `search` never imports Flask, PyGithub or jira, while every dependency stays a real import.
def _agents_md() -> ModuleType:
    from bot.cli import agents_md

    return agents_md


def _bullets() -> ModuleType:
    from bot.cli import bullets

    return bullets


def _consolidate() -> ModuleType:
    from bot.cli import consolidate

    return consolidate


def _database() -> ModuleType:
    from bot.cli import database

    return database


def _deliveries() -> ModuleType:
    from bot.cli import deliveries

    return deliveries


def _embed() -> ModuleType:
    from bot.cli import embed

    return embed


def _experiment() -> ModuleType:
    from bot.cli import experiment

    return experiment


def _gaps() -> ModuleType:
    from bot.cli import gaps

    return gaps


def _loop() -> ModuleType:
    from bot.cli import loop

    return loop


def _maintenance() -> ModuleType:
    from bot.cli import maintenance

    return maintenance


def _mcp() -> ModuleType:
    from bot.cli import mcp

    return mcp


def _relevance() -> ModuleType:
    from bot.cli import relevance

    return relevance


def _repo_config() -> ModuleType:
    from bot.cli import repo_config

    return repo_config


def _ratings() -> ModuleType:
    from bot.cli import ratings

    return ratings


def _reports() -> ModuleType:
    from bot.cli import reports

    return reports


def _rules() -> ModuleType:
    from bot.cli import rules

    return rules


def _scan() -> ModuleType:
    from bot.cli import scan

    return scan


def _search() -> ModuleType:
    from bot.cli import search

    return search


def _service() -> ModuleType:
    from bot.cli import service

    return service


def _stale() -> ModuleType:
    from bot.cli import stale

    return stale


def _supersede() -> ModuleType:
    from bot.cli import supersede

    return supersede


def _transfer() -> ModuleType:
    from bot.cli import transfer

    return transfer


def _usage() -> ModuleType:
    from bot.cli import usage

    return usage


# name -> (module loader, attribute, short help). A test keeps the helps equal to the commands'.
COMMANDS: dict[str, Lazy] = {
    "add": (
        _bullets,
        "add",
        "Add a lesson and print its id (or the id of the near-duplicate that already exists).",
    ),
    "agents-md": (
        _agents_md,
        "agents_md_group",
        "Keep the best lessons in a repository's AGENTS.md through one pull request.",
    ),
    "approve": (_bullets, "approve", "Make a proposed bullet active."),
    "archive": (
        _bullets,
        "archive",
        "Archive a bullet (kept, not retrieved; `restore` undoes it).",
    ),
    "backfill": (
        _loop,
        "backfill",
        "Apply closed pull requests from the API (links, lessons, cites, outcomes).",
    ),
    "config": (
        _repo_config,
        "config",
        "Show a repository's settings in force, where each comes from, and what is wrong.",
    ),
    "consolidate": (
        _consolidate,
        "consolidate",
        "Propose merging overlapping lessons in scopes past 75% of their context budget.",
    ),
    "consolidations": (
        _consolidate,
        "consolidations_group",
        "Review consolidation proposals: list, show, accept (maybe edited), reject, undo.",
    ),
    "db": (_database, "db_group", "Manage the database schema."),
    "deliveries": (
        _deliveries,
        "deliveries_group",
        "Inspect and replay webhook deliveries.",
    ),
    "demo": (
        _reports,
        "demo",
        "Run the whole loop on a temporary playbook, with no credentials and no network.",
    ),
    "deprecate": (
        _bullets,
        "deprecate",
        "Soft-deprecate a bullet (kept, not retrieved; `restore` undoes it).",
    ),
    "doctor": (
        _loop,
        "doctor",
        "Check every configured connection and say what works and what to fix.",
    ),
    "edit": (
        _bullets,
        "edit",
        "Change a bullet's text, tags, section, scope, provenance or anchors.",
    ),
    "embed": (
        _embed,
        "embed",
        "Queue the embedding of active lessons whose embedding is missing or stale (--backfill).",
    ),
    "experiment": (
        _experiment,
        "experiment_group",
        "The holdout experiment: its report, or `start` and `stop` it.",
    ),
    "export": (
        _transfer,
        "export",
        "Export the playbook (or its usage log) to stdout or a file, written as it is read.",
    ),
    "gaps": (
        _gaps,
        "gaps",
        "Recent tickets that got no lesson, grouped by similarity: where to write lessons next.",
    ),
    "history": (
        _bullets,
        "history",
        "Every change made to a bullet: who, when, why, before and after.",
    ),
    "import": (
        _transfer,
        "import_",
        "Import bullets (YAML, JSONL, CSV) or a .lesson-usage.jsonl usage log.",
    ),
    "import-rules": (
        _rules,
        "import_rules",
        "Import agent rule files (AGENTS.md, CLAUDE.md, .cursorrules, ...) as lessons.",
    ),
    "list": (_bullets, "list_", "List bullets."),
    "mcp": (
        _mcp,
        "mcp",
        "Serve the playbook to a local agent over MCP (stdio).",
    ),
    "prune": (
        _maintenance,
        "prune",
        "Archive active lessons nobody loaded or cited for --idle-days (dry run by default).",
    ),
    "purge": (
        _maintenance,
        "purge",
        "Delete finished webhook deliveries, side-effect and retrieval logs older than a span.",
    ),
    "rate": (
        _ratings,
        "rate",
        "Queue the model's rating of lessons shown to closed pull requests (--backfill).",
    ),
    "reconcile": (
        _maintenance,
        "reconcile",
        "Ask GitHub to redeliver failed App webhook deliveries that never reached the inbox.",
    ),
    "relevance": (
        _relevance,
        "relevance",
        "What people's 👍/👎 and replies taught the relevance estimate, per scope.",
    ),
    "restore": (
        _bullets,
        "restore",
        "Make a deprecated, archived or superseded bullet active again.",
    ),
    "revert": (
        _bullets,
        "revert",
        "Undo one revision of a bullet (see `history`); the undo is itself a revision.",
    ),
    "scan": (
        _scan,
        "scan",
        "List lessons that hold a credential (kind and place, never the value); exit 1 if any.",
    ),
    "search": (
        _search,
        "search",
        "Rank the active lessons for a ticket's text (first line = summary).",
    ),
    "serve": (
        _service,
        "serve",
        "Serve the webhook endpoints and process deliveries in the same process.",
    ),
    "show": (_bullets, "show", "Show one bullet with its usage counters and history."),
    "stats": (
        _reports,
        "stats",
        "How the playbook is doing: bullets, usage, coverage, best and worst lessons.",
    ),
    "stale": (
        _stale,
        "stale",
        "List lessons flagged possibly stale by a merged PR, or clear one's flag (--clear ID).",
    ),
    "supersede": (
        _supersede,
        "supersede",
        "Mark a bullet superseded by a newer one (kept, not retrieved; `restore` undoes it).",
    ),
    "usage": (
        _usage,
        "usage_group",
        "Record loads and cites, and check the counters against the event log.",
    ),
    "worker": (
        _service,
        "worker",
        "Process inbox deliveries (run beside gunicorn in production).",
    ),
}
main.lazy.update(COMMANDS)

__all__ = ["COMMANDS", "main"]

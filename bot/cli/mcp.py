"""`playbook-bot mcp`: the playbook served to a local agent over MCP on stdin and stdout."""

from __future__ import annotations

import click

from bot.cli.base import Context, pass_context


@click.command(
    epilog="The agent's host starts this command and speaks MCP on its stdin and stdout; logs "
    "go to stderr. The agent searches, reads, cites and proposes lessons as the local user "
    "(PLAYBOOK_ACTOR, else mcp:<login>), in PLAYBOOK_AGENT_SCOPE (every scope when unset)."
)
@pass_context
def mcp(ctx: Context) -> None:
    """Serve the playbook to a local agent over MCP (stdio)."""
    from bot.mcp_server import build_server, local_caller

    settings = ctx.settings
    # Open the database (creating an SQLite schema, checking a server's) before the client
    # connects: a wrong PLAYBOOK_DATABASE_URL fails here, in one line, not on every call.
    engine = ctx.engine
    server = build_server(settings, lambda: engine, local_caller(settings))
    server.run("stdio")

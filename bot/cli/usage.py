"""Commands that record and check usage events."""

from __future__ import annotations

import click

from bot.cli.base import Context, UserError, pass_context
from playbook import usage


@click.group(name="usage")
def usage_group() -> None:
    """Record loads and cites, and check the counters against the event log."""


@usage_group.command(name="record")
@click.argument("kind", type=click.Choice(["loaded", "cited"]))
@click.option("--ids", required=True, help="Comma-separated bullet ids, in the order shown.")
@click.option("--ticket", required=True, help="Ticket the work was for, e.g. CTMS-4337.")
@click.option("--phase", default=None, help="Agent phase, e.g. plan, implement, review.")
@click.option("--consumer", default=None, help="Which agent or tool used the lessons.")
@click.option(
    "--success/--failure",
    default=None,
    help="Outcome of the work that cited the lessons (default: unknown).",
)
@click.option("--query-id", default=None, help="The search that showed the lessons.")
@pass_context
def record(
    ctx: Context,
    kind: str,
    ids: str,
    ticket: str,
    phase: str | None,
    consumer: str | None,
    success: bool | None,
    query_id: str | None,
) -> None:
    """Record that bullets were loaded into or cited by work on a ticket."""
    bullet_ids = [item.strip() for item in ids.split(",") if item.strip()]
    if not bullet_ids:
        raise UserError("--ids needs at least one bullet id, e.g. --ids pb-1,pb-2")
    if kind == "loaded" and success is not None:
        raise UserError("--success/--failure apply to cites, not loads")
    with ctx.transaction() as session:
        events = usage.record(
            session,
            kind,
            bullet_ids,
            ticket_key=ticket.strip(),
            phase=phase,
            consumer=consumer,
            success=success,
            # The order of --ids is the order the lessons were shown in.
            ranks=list(range(1, len(bullet_ids) + 1)) if kind == "loaded" else None,
            query_id=query_id,
        )
    click.echo(f"recorded {len(events)} {kind} event{'s' if len(events) != 1 else ''}")


@usage_group.command(name="recount")
@click.option("--check", is_flag=True, help="Only report drift; exit 1 if any.")
@pass_context
def recount(ctx: Context, check: bool) -> None:
    """Make the bullets' usage counters match the event log."""
    with ctx.transaction() as session:
        drifted = usage.recount(session)
        if check:
            session.rollback()
    if not drifted:
        click.echo("counters match the event log")
        return
    verb = "differ" if check else "fixed"
    click.echo(f"{len(drifted)} bullet(s) {verb}: {', '.join(drifted)}")
    if check:
        raise SystemExit(1)


def register(group: click.Group) -> None:
    """Attach this module's commands to the root group."""
    group.add_command(usage_group)

"""Commands that record and check usage events."""

from __future__ import annotations

import click

from bot.cli.base import Context, UserError, pass_context
from playbook.lessons import fields
from playbook.outcomes import self_reports, usage


@click.group(name="usage")
def usage_group() -> None:
    """Record loads and cites, and check the counters against the event log."""


@usage_group.command(name="record")
@click.argument("kind", type=click.Choice(["loaded", "cited"]))
@click.option("--ids", required=True, help="Comma-separated bullet ids, in the order shown.")
@click.option("--ticket", default=None, help="Ticket the work was for, e.g. CTMS-4337 (required).")
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
    ticket: str | None,
    phase: str | None,
    consumer: str | None,
    success: bool | None,
    query_id: str | None,
) -> None:
    """Record that bullets were loaded into or cited by work on a ticket.

    Each (ticket, lesson, kind) counts once: running the same command again adds nothing,
    and a repeated cite with --success/--failure settles the outcome of the first.
    """
    bullet_ids = list(dict.fromkeys(item.strip() for item in ids.split(",") if item.strip()))
    if not bullet_ids:
        raise UserError("--ids needs at least one bullet id, e.g. --ids pb-1,pb-2")
    # Checked by hand rather than by click's required=True, whose answer is a usage page.
    ticket = (ticket or "").strip()
    if not ticket:
        raise UserError("--ticket is required: the ticket the work was for, e.g. CTMS-4337")
    if kind == "loaded" and success is not None:
        raise UserError("--success/--failure apply to cites, not loads")
    # Checked here, not by the database, so the message names the option (a domain
    # InvalidInput becomes `error: ...` and exit 2).
    for bullet_id in bullet_ids:
        fields.bounded(bullet_id, "--ids", fields.BULLET_ID_CHARS)
    for option, value, limit in (
        ("--ticket", ticket, fields.TICKET_KEY_CHARS),
        ("--phase", phase, fields.PHASE_CHARS),
        ("--consumer", consumer, fields.CONSUMER_CHARS),
        ("--query-id", query_id, fields.QUERY_ID_CHARS),
    ):
        if value is not None:
            fields.bounded(value, option, limit)
    with ctx.transaction() as session:
        events = usage.record_once(
            session,
            kind,
            bullet_ids,
            ticket_key=ticket,
            phase=phase,
            consumer=consumer,
            success=success,
            # The order of --ids is the order the lessons were shown in.
            ranks=list(range(1, len(bullet_ids) + 1)) if kind == "loaded" else None,
            query_id=query_id,
            # A report like an agent's: it weighs what playbook/outcomes/self_reports.py allows.
            source=ctx.actor,
            credit_replacement=ctx.settings.superseded_cites_count_for_replacement,
        )
        tally = usage.Tally()
        tally.add(events)
    message = f"recorded {len(events)} {kind} event{'s' if len(events) != 1 else ''}"
    again = [i for i in bullet_ids if i not in {event.bullet_id for event in events}]
    if again:
        message += f"; {', '.join(again)} already counted for {ticket}"
    for reason, count in (tally.discounted or {}).items():
        message += f"; {count} weighed less ({reason}): {self_reports.DISCOUNTS[reason]}"
    click.echo(message)


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

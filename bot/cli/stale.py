"""`playbook-bot stale`: lessons a merged PR may have made stale, and clearing their flag."""

from __future__ import annotations

import textwrap

import click

from bot.cli.base import Context, UserError, echo_json, note, pass_context
from bot.escapes import escaped
from playbook import clock
from playbook.anchors import stale as flags


@click.command()
@click.option("--clear", "clear_id", default=None, metavar="ID", help="Clear this lesson's flag.")
@click.option("--reason", default=None, help="Why the lesson still holds (kept in its history).")
@click.option("--scope", default=None, help="Only this scope.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@pass_context
def stale(
    ctx: Context, clear_id: str | None, reason: str | None, scope: str | None, as_json: bool
) -> None:
    """List lessons flagged possibly stale by a merged PR, or clear one's flag (--clear ID).

    Confirming one is an `edit`, `supersede` or `deprecate`, which clears its flag too.
    """
    if clear_id is not None:
        with ctx.transaction() as session:
            cleared = flags.clear(session, clear_id, actor=ctx.actor, reason=reason)
        if not cleared:
            note(f"{clear_id} is not flagged; nothing changed")
        else:
            click.echo(f"{clear_id}: stale flag cleared")
        return
    if reason is not None:
        raise UserError("--reason goes with --clear ID")
    with ctx.transaction() as session:
        rows = flags.flagged(session, scope=scope, limit=10_000)
    if as_json:
        echo_json(rows)
        return
    if not rows:
        note("no lesson is flagged")
        return
    click.echo(f"{'id':<8} {'since':<11} {'pr':<24} lesson / what changed")
    for row in rows:
        since = clock.to_utc(row["stale_since"]).date().isoformat()
        head = escaped(textwrap.shorten(row["text"], width=60, placeholder="..."))
        pr = escaped(row["stale_pr"] or "")
        click.echo(f"{row['id']:<8} {since:<11} {pr:<24} {head}")
        gone = " (left out of AGENTS.md until looked at)" if row["files_gone"] else ""
        click.echo(f"{'':<45} {escaped(row['stale_detail'] or '')}{gone}")

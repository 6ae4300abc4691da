"""`playbook-bot supersede OLD --by NEW`: a newer lesson replaces an older one."""

from __future__ import annotations

import click

from bot.cli.base import Context, pass_context
from playbook.lessons import lifecycle


@click.command()
@click.argument("bullet_id")
@click.option("--by", "by", required=True, help="The lesson replacing it (active or proposed).")
@click.option("--reason", default=None, help="Why (kept in both lessons' history).")
@pass_context
def supersede(ctx: Context, bullet_id: str, by: str, reason: str | None) -> None:
    """Mark a bullet superseded by a newer one (kept, not retrieved; `restore` undoes it)."""
    with ctx.transaction() as session:
        change = lifecycle.supersede(session, bullet_id, by, actor=ctx.actor, reason=reason)
        old, new = change.bullet.id, change.bullet.superseded_by
    if change.changed:
        click.echo(f"{old} superseded by {new}")
    else:
        click.echo(f"{old} is already superseded by {new}; nothing changed")

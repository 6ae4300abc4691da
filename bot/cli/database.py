"""Commands that manage the database schema."""

from __future__ import annotations

import click

from bot.cli.base import Context, pass_context
from playbook import db


@click.group(name="db")
def db_group() -> None:
    """Manage the database schema."""


@db_group.command()
@pass_context
def upgrade(ctx: Context) -> None:
    """Create or migrate the schema to the version this code needs."""
    engine = db.make_engine(ctx.settings.database_url)
    try:
        before = db.current_revision(engine)
        db.upgrade(engine)
        after = db.current_revision(engine)
    finally:
        engine.dispose()
    if before == after:
        click.echo(f"schema already at {after}")
    else:
        click.echo(f"schema upgraded from {before or 'empty'} to {after}")


@db_group.command()
@pass_context
def current(ctx: Context) -> None:
    """Print the schema version of the database and of this code."""
    engine = db.make_engine(ctx.settings.database_url)
    try:
        click.echo(
            f"database: {db.current_revision(engine) or 'empty'}; code: {db.head_revision(engine)}"
        )
    finally:
        engine.dispose()

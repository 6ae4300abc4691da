"""Commands that move a playbook in and out: import and export."""

from __future__ import annotations

from pathlib import Path

import click

from bot.cli.base import Context, UserError, note, pass_context
from playbook import io
from playbook.models import STATUSES


@click.command(name="import")
@click.argument("path", type=click.Path(path_type=Path))
@pass_context
def import_(ctx: Context, path: Path) -> None:
    """Import bullets (YAML, JSONL, CSV) or a .lesson-usage.jsonl usage log."""
    with ctx.transaction() as session:
        report = io.import_file(session, path, actor=ctx.actor)
    for position, message in report.errors:
        note(f"{path}:{position}: {message}")
    click.echo(report.summary())
    if not report.ok:
        # The good part is imported; the exit code tells scripts that something was skipped.
        count = len(report.errors)
        raise UserError(
            f"{count} entr{'y' if count == 1 else 'ies'} of {path} could not be imported"
        )


@click.command()
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["yaml", "jsonl", "csv"]),
    default="yaml",
    show_default=True,
)
@click.option(
    "-o", "--output", type=click.Path(path_type=Path), default=None, help="File to write."
)
@click.option(
    "--status",
    type=click.Choice([*STATUSES, "all"]),
    default="all",
    show_default=True,
    help="Only bullets in this status.",
)
@click.option("--usage", "usage_log", is_flag=True, help="Export the usage log (JSONL) instead.")
@pass_context
def export(ctx: Context, fmt: str, output: Path | None, status: str, usage_log: bool) -> None:
    """Export the playbook (or its usage log) to stdout or a file."""
    with ctx.transaction() as session:
        if usage_log:
            content = io.export_usage(session)
        else:
            statuses = None if status == "all" else [status]
            content = io.export_bullets(session, fmt, statuses)  # type: ignore[arg-type]
    if output is None:
        click.echo(content, nl=False)
        return
    try:
        output.write_text(content, encoding="utf-8")
    except OSError as error:
        raise UserError(f"cannot write {output}: {error.strerror}") from None
    note(f"wrote {output}")


def register(group: click.Group) -> None:
    """Attach this module's commands to the root group."""
    group.add_command(import_)
    group.add_command(export)

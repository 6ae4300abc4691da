"""Commands that move a playbook in and out: import and export."""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

import click
from sqlalchemy.orm import Session

from bot.cli.base import Context, UserError, note, pass_context
from bot.escapes import unguarded
from playbook.models import STATUSES
from playbook.transfer.export import write_bullets
from playbook.transfer.imports import import_file
from playbook.transfer.reports import ImportRefused
from playbook.transfer.usage_log import write_usage


class _Progress:
    """A progress bar on stderr while a person watches; nothing when stderr is a file or pipe."""

    def __init__(self, label: str) -> None:
        self.label = label
        self.done = 0
        self.total = 0
        self.bar: Any = None

    def update(self, done: int, total: int) -> None:
        if self.bar is None and sys.stderr.isatty():
            self.bar = click.progressbar(length=total, label=self.label, file=sys.stderr)
        if self.bar is not None:
            self.bar.update(done - self.done)
        self.done, self.total = done, total

    def finish(self) -> None:
        if self.bar is not None:
            self.bar.render_finish()


@click.command(name="import")
@click.argument("path", type=click.Path(path_type=Path))
@pass_context
def import_(ctx: Context, path: Path) -> None:
    """Import bullets (YAML, JSONL, CSV) or a .lesson-usage.jsonl usage log.

    The whole file is checked first: if an entry is bad, nothing is imported and the first
    problems are listed by line. Then it is written in batches of 1,000, each committed;
    importing the file again skips what is already there.
    """
    progress = _Progress(f"importing {path.name}")
    try:
        with ctx.transaction() as session:
            report = import_file(
                session,
                path,
                actor=ctx.actor,
                max_chars=ctx.settings.max_lesson_chars,
                progress=progress.update,
            )
    except ImportRefused as refused:
        if refused.total == 1:
            raise UserError(f"{path}: {refused.problems[0]}; nothing was imported") from None
        for problem in refused.problems:
            note(f"{path}: {problem}")
        shown = len(refused.problems)
        first = "above" if shown == refused.total else f"the first {shown} above"
        raise UserError(
            f"{refused.total} problems in {path} ({first}); nothing was imported"
        ) from None
    except BaseException:
        if progress.done:
            # Committed batches stay; say so, so nobody thinks the file was refused whole.
            note(
                f"{progress.done} of {progress.total} entries of {path} were imported before "
                "this error; importing the file again skips them"
            )
        raise
    finally:
        progress.finish()
    click.echo(report.summary())


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
    """Export the playbook (or its usage log) to stdout or a file, written as it is read."""
    statuses = None if status == "all" else [status]

    def write(session: Session, out: IO[str]) -> int:
        if usage_log:
            return write_usage(session, out)
        return write_bullets(session, out, fmt, statuses)  # type: ignore[arg-type]

    with ctx.transaction() as session:
        if output is None:
            _to_stdout(lambda out: write(session, out))
            return
        count = _to_file(output, lambda out: write(session, out))
    note(f"wrote {count} {'events' if usage_log else 'bullets'} to {output}")


def _to_stdout(write: Callable[[IO[str]], int]) -> None:
    # The export is data that import reads back byte for byte: it skips the terminal guard
    # (its JSON escapes control characters; its text is the lessons' own, cleaned at the door).
    out = unguarded(sys.stdout)
    try:
        write(out)
        out.flush()
    except BrokenPipeError:
        # The reader went away (`export | head`): stop quietly, as other tools do. Point
        # stdout at /dev/null so Python's own flush at exit does not fail a second time.
        with contextlib.suppress(OSError, ValueError):
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        raise SystemExit(1) from None


def _to_file(output: Path, write: Callable[[IO[str]], int]) -> int:
    """Write to a temporary file beside ``output``, then rename it: never half a file."""
    if output.is_dir():
        raise UserError(f"cannot write {output}: it is a directory")
    try:
        handle, name = tempfile.mkstemp(
            dir=output.parent, prefix=f".{output.name}.", suffix=".partial"
        )
    except OSError as error:
        raise UserError(f"cannot write {output}: {error.strerror}") from None
    temporary = Path(name)
    try:
        with os.fdopen(handle, "w", encoding="utf-8", newline="") as out:
            count = write(out)
        # mkstemp makes the file private; give it the mode a new file would have had.
        umask = os.umask(0)
        os.umask(umask)
        temporary.chmod(0o666 & ~umask)
        temporary.replace(output)
    except OSError as error:
        temporary.unlink(missing_ok=True)
        raise UserError(f"cannot write {output}: {error.strerror}") from None
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
    return count

"""`playbook-bot config --file PATH`: a local settings file checked offline, as the bot would."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import TYPE_CHECKING

import click

from bot.cli.base import CommandFailed, echo_json
from bot.escapes import escaped

if TYPE_CHECKING:
    from playbook.repos.settings import Parsed


def read_bounded(path: Path, limit: int) -> tuple[bytes, int]:
    """At most ``limit + 1`` bytes of ``path`` and its size (a pipe's: what was read).

    A file that cannot be opened is a mistake in the command: one line, exit 2.
    """
    try:
        with path.open("rb") as handle:
            content = handle.read(limit + 1)
            info = os.fstat(handle.fileno())
    except OSError as error:
        raise click.BadParameter(
            f"cannot read {path} ({error.strerror or error})", param_hint="'--file'"
        ) from None
    size = info.st_size if stat.S_ISREG(info.st_mode) else len(content)
    return content, max(size, len(content))


def check_file(path: Path, repo: str | None) -> Parsed:
    """``path`` read and checked by the bot's own parser, named as the command named it.

    ``repo`` (OWNER/NAME) is the repository the file is for: a scope must be its owner's.
    """
    from playbook.repos.settings import MAX_FILE_BYTES, parse, too_big

    content, size = read_bounded(path, MAX_FILE_BYTES)
    if size > MAX_FILE_BYTES:
        return too_big(str(path), size)
    owner = repo.split("/", maxsplit=1)[0] if repo else None
    return parse(content, str(path), owner)


def show(path: Path, parsed: Parsed, *, repo: str | None, as_json: bool, check: bool) -> None:
    """Print what the check found: one OK line, or one line per problem; --check fails on one."""
    problems = parsed.problems
    if as_json:
        echo_json(
            {
                "file": str(path),
                "ok": not problems,
                "problems": [problem.as_dict() for problem in problems],
            }
        )
    elif problems:
        for problem in problems:
            click.echo(escaped(problem))
    else:
        scope = (parsed.values or {}).get("scope")
        unchecked = (
            " (its scope's owner is checked with --repo OWNER/NAME)" if scope and not repo else ""
        )
        click.echo(f"{escaped(path)}: OK, the bot would apply it{unchecked}")
    if check and problems:
        count = len(problems)
        raise CommandFailed(f"{path}: {count} problem{'s' if count != 1 else ''}")

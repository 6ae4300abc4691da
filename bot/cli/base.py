"""The CLI's root group, shared context and error handling."""

from __future__ import annotations

import getpass
import importlib
import json
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from datetime import datetime
from functools import cached_property
from typing import TYPE_CHECKING, Any

import click

from playbook.errors import DatabaseUnavailable, PlaybookError

# Only this module and click load before a command runs: `playbook-bot --help` must not wait
# for SQLAlchemy, pydantic, Flask, PyGithub or jira, so each is imported where it is used.
if TYPE_CHECKING:
    from sqlalchemy import Engine
    from sqlalchemy.orm import Session

    from bot.config import Settings


class UserError(click.ClickException):
    """An error the user caused and can fix: one sentence on stderr, exit code 2."""

    exit_code = 2

    def show(self, file: Any = None) -> None:
        """Print the sentence without click's 'Error:' prefix noise about usage."""
        click.echo(f"error: {self.format_message()}", err=True, file=file)


class PlaybookGroup(click.Group):
    """A group that loads its commands' modules on use and turns expected errors into one line.

    ``lazy`` maps a command name to ``(module, attribute, short help)``; the module is
    imported only when the command runs or shows its own help.
    """

    def __init__(
        self, *args: Any, lazy: Mapping[str, tuple[str, str, str]] | None = None, **kwargs: Any
    ) -> None:
        super().__init__(*args, **kwargs)
        self.lazy: dict[str, tuple[str, str, str]] = dict(lazy or {})

    def list_commands(self, ctx: click.Context) -> list[str]:
        """Every command's name, loaded or not."""
        return sorted({*self.commands, *self.lazy})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        """The command, importing its module the first time it is asked for."""
        if cmd_name not in self.commands and cmd_name in self.lazy:
            module, attribute, _ = self.lazy[cmd_name]
            self.add_command(getattr(importlib.import_module(module), attribute), cmd_name)
        return super().get_command(ctx, cmd_name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The commands table of ``--help``, from the short helps, without loading a module."""
        names = self.list_commands(ctx)
        limit = formatter.width - 6 - max((len(name) for name in names), default=0)
        rows = []
        for name in names:
            command = self.commands.get(name)
            if command is None:
                # A stand-in with the same help shortens it exactly as the command would.
                stand_in = click.Command(name, help=self.lazy[name][2])
                rows.append((name, stand_in.get_short_help_str(limit)))
            elif not command.hidden:
                rows.append((name, command.get_short_help_str(limit)))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)

    def invoke(self, ctx: click.Context) -> Any:
        """Run the command, translating expected failures into one clear sentence."""
        try:
            return super().invoke(ctx)
        except (PlaybookError, DatabaseUnavailable) as error:
            raise UserError(str(error)) from None
        except Exception as error:
            from pydantic import ValidationError  # loaded by then: settings are read first

            if not isinstance(error, ValidationError):
                raise
            problems = "; ".join(
                f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in error.errors()
            )
            raise UserError(f"invalid setting ({problems})") from None


class Context:
    """What every command needs: settings, the engine (opened on first use) and the actor."""

    def __init__(self, actor: str | None) -> None:
        self._actor = actor

    @cached_property
    def settings(self) -> Settings:
        """Settings from the environment, read once."""
        from bot.config import Settings

        return Settings()

    @property
    def actor(self) -> str:
        """Who the revisions written by this command are attributed to."""
        return self._actor or self.settings.actor or f"cli:{getpass.getuser()}"

    @cached_property
    def engine(self) -> Engine:
        """The playbook database, with its schema created or checked."""
        from playbook import db

        engine = db.make_engine(self.settings.database_url)
        db.ensure_schema(engine)
        return engine

    def close(self) -> None:
        """Return the engine's pooled connections once the command is over."""
        if "engine" in self.__dict__:
            self.__dict__.pop("engine").dispose()

    @contextmanager
    def transaction(self) -> Iterator[Session]:
        """A session committed when the command's work succeeds."""
        from playbook import db

        with db.transaction(self.engine) as session:
            yield session


pass_context = click.make_pass_decorator(Context)


@click.group(cls=PlaybookGroup)
@click.option(
    "--actor", help="Name recorded in revisions (default: PLAYBOOK_ACTOR, else cli:<login>)."
)
@click.version_option(package_name="playbook-bot")
@click.pass_context
def main(ctx: click.Context, actor: str | None) -> None:
    """Keep a self-improving playbook of lessons for AI engineering agents."""
    from pydantic import ValidationError

    from bot.logs import configure_logging

    context = Context(actor)
    ctx.obj = context
    ctx.call_on_close(context.close)
    try:
        settings = context.settings
        configure_logging(settings.log_level, settings.log_format, settings.secret_values())
    except ValidationError as error:
        problems = "; ".join(f"{e['loc'][0]}: {e['msg']}" for e in error.errors())
        raise UserError(f"invalid setting ({problems})") from None


def echo_json(value: Any) -> None:
    """Print a value as indented JSON, datetimes as ISO 8601."""
    click.echo(json.dumps(value, indent=2, default=_json_default, ensure_ascii=False))


def _json_default(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    raise TypeError(f"cannot serialise {type(value).__name__}")


def note(message: str) -> None:
    """Print a remark for humans on stderr, keeping stdout clean for ids and JSON."""
    click.echo(message, err=True)


def stdout_is_terminal() -> bool:
    """True when a person is reading stdout."""
    return sys.stdout.isatty()

"""The CLI's root group, shared context and error handling."""

from __future__ import annotations

import getpass
import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from functools import cached_property
from typing import Any

import click
from pydantic import ValidationError
from sqlalchemy import Engine
from sqlalchemy.orm import Session

from bot.config import Settings
from bot.logs import configure_logging
from playbook import db
from playbook.errors import DatabaseUnavailable, PlaybookError


class UserError(click.ClickException):
    """An error the user caused and can fix: one sentence on stderr, exit code 2."""

    exit_code = 2

    def show(self, file: Any = None) -> None:
        """Print the sentence without click's 'Error:' prefix noise about usage."""
        click.echo(f"error: {self.format_message()}", err=True, file=file)


class PlaybookGroup(click.Group):
    """A group that turns domain and configuration errors into UserError."""

    def invoke(self, ctx: click.Context) -> Any:
        """Run the command, translating expected failures into one clear sentence."""
        try:
            return super().invoke(ctx)
        except (PlaybookError, DatabaseUnavailable) as error:
            raise UserError(str(error)) from None
        except ValidationError as error:
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
        return Settings()

    @property
    def actor(self) -> str:
        """Who the revisions written by this command are attributed to."""
        return self._actor or self.settings.actor or f"cli:{getpass.getuser()}"

    @cached_property
    def engine(self) -> Engine:
        """The playbook database, with its schema created or checked."""
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

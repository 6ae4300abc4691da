"""The CLI's root group, shared context and error handling."""

from __future__ import annotations

import errno
import getpass
import json
import re
import sys
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from datetime import UTC, datetime
from functools import cached_property
from types import ModuleType
from typing import TYPE_CHECKING, Any

import click
from click.exceptions import NoArgsIsHelpError

from bot.escapes import guarded_output, json_text
from playbook.errors import DatabaseUnavailable, PlaybookError

# Only this module and click load before a command runs: `playbook-bot --help` must not wait
# for SQLAlchemy, pydantic, Flask, PyGithub or jira, so each is imported where it is used.
if TYPE_CHECKING:
    from sqlalchemy import Engine
    from sqlalchemy.orm import Session

    from bot.config import Settings


# An error's sentence is cut here: a pasted 100 KB argument must not become a 100 KB line.
MAX_ERROR_CHARS = 1000


def one_line(text: str) -> str:
    """``text`` as a single line of at most MAX_ERROR_CHARS, scrubbed of the known secrets,
    with no raw control character (an error may quote a file, a header or an argument)."""
    from bot.escapes import escaped
    from bot.logs import redact  # only once something failed: `--help` must stay light

    text = escaped(" ".join(redact(text).split()))
    return text if len(text) <= MAX_ERROR_CHARS else f"{text[: MAX_ERROR_CHARS - 1]}…"


class CommandError(click.ClickException):
    """An error shown as one line on stderr, ``error: <what to fix>``, and a non-zero exit."""

    exit_code = 1

    def show(self, file: Any = None) -> None:
        """Print the sentence without click's 'Error:' prefix noise about usage."""
        click.echo(f"error: {one_line(self.format_message())}", err=True, file=file)


class UserError(CommandError):
    """Something in the command, a file or a setting is wrong and the user can fix it: exit 2."""

    exit_code = 2


class CommandFailed(CommandError):
    """The command was right but could not finish (GitHub said no, the port is taken): exit 1."""

    exit_code = 1


class UsageLine(click.UsageError):
    """click's usage error as one line that names the command's ``--help``: exit 2."""

    def show(self, file: Any = None) -> None:
        """``error: <click's message> (see `playbook-bot CMD --help`)``."""
        message = one_line(self.format_message()).rstrip(".")
        message = message[:1].lower() + message[1:]  # click writes "No such option"
        hint = f" (see `{self.ctx.command_path} --help`)" if self.ctx else ""
        click.echo(f"error: {message}{hint}", err=True, file=file)


def debugging(ctx: click.Context) -> bool:
    """Whether ``--debug`` (or PLAYBOOK_DEBUG=1) asked for tracebacks."""
    return bool(ctx.find_root().params.get("debug"))


def show_traceback(error: BaseException) -> None:
    """The full traceback of ``error`` on stderr, scrubbed of the known secrets, each
    exception's message escaped to one line (it may quote outside text)."""
    from bot.escapes import traceback_text
    from bot.logs import redact

    click.echo(redact(traceback_text(type(error), error, error.__traceback__)), err=True)


# A command not loaded yet: the function that imports its module, its attribute, its short help.
Lazy = tuple[Callable[[], ModuleType], str, str]


class PlaybookGroup(click.Group):
    """A group that loads its commands' modules on use and turns expected errors into one line.

    ``lazy`` maps a command name to ``(load, attribute, short help)``; ``load()`` imports the
    command's module (an ordinary import) only when the command runs or shows its own help.
    """

    def __init__(self, *args: Any, lazy: Mapping[str, Lazy] | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.lazy: dict[str, Lazy] = dict(lazy or {})

    def list_commands(self, ctx: click.Context) -> list[str]:
        """Every command's name, loaded or not."""
        return sorted({*self.commands, *self.lazy})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        """The command, importing its module the first time it is asked for."""
        if cmd_name not in self.commands and cmd_name in self.lazy:
            load, attribute, _ = self.lazy[cmd_name]
            self.add_command(getattr(load(), attribute), cmd_name)
        return super().get_command(ctx, cmd_name)

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        """The command named first in ``args``; a typo is told the close names of every
        command, loaded or not (click would suggest only among those already loaded)."""
        name = args[0]
        missing = self.get_command(ctx, name) is None and not ctx.resilient_parsing
        if missing and not name.startswith("-"):
            raise click.exceptions.NoSuchCommand(
                name, possibilities=self.list_commands(ctx), ctx=ctx
            )
        return super().resolve_command(ctx, args)

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

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        """The root's own options; a mistake in them is one line too."""
        try:
            return super().parse_args(ctx, args)
        except NoArgsIsHelpError:
            raise  # `playbook-bot` alone prints its help
        except click.UsageError as error:
            raise UsageLine(error.format_message(), error.ctx) from None

    def invoke(self, ctx: click.Context) -> Any:
        """Run the command; whatever goes wrong ends as one line on stderr, never a traceback.

        Expected failures say what to fix; anything else names its type and message and
        points at ``--debug``, which prints the traceback of any failure first.
        """
        try:
            # Whatever the command prints passes the terminal guard (bot.escapes), whichever
            # way it prints: click.echo, print, a log handler or a library.
            with guarded_output():
                return super().invoke(ctx)
        except (click.exceptions.Exit, click.Abort, NoArgsIsHelpError, UsageLine):
            raise
        except CommandError as error:
            # `raise UserError(...) from None` still keeps what it replaced as the context.
            cause = error.__cause__ or error.__context__
            if cause is not None and debugging(ctx):
                show_traceback(cause)
            raise
        except click.UsageError as error:
            raise UsageLine(error.format_message(), error.ctx) from None
        except click.ClickException as error:
            failure = CommandError(error.format_message())
            failure.exit_code = error.exit_code
            raise failure from None
        except (PlaybookError, DatabaseUnavailable) as error:
            if debugging(ctx):
                show_traceback(error)
            raise UserError(str(error)) from None
        except Exception as error:
            if isinstance(error, OSError) and error.errno == errno.EPIPE:
                raise  # the reader went away (`list | head`): click exits quietly
            if debugging(ctx):
                show_traceback(error)
            pydantic = sys.modules.get("pydantic")  # settings are read before any command
            if pydantic is not None and isinstance(error, pydantic.ValidationError):
                raise UserError(invalid_settings(error)) from None
            raise CommandFailed(unexpected(error, debug=debugging(ctx))) from None


def invalid_settings(error: Any) -> str:
    """A pydantic ValidationError of the settings as one sentence naming each setting."""
    problems = "; ".join(_problem(problem) for problem in error.errors())
    return f"invalid setting ({problems})"


def _problem(problem: Any) -> str:
    where = ".".join(str(part) for part in problem["loc"])
    # A check across settings has no one setting to name: its message names them all.
    said = problem["msg"].removeprefix("Value error, ")
    return f"{where}: {said}" if where else said


def unexpected(error: BaseException, *, debug: bool) -> str:
    """An error nobody planned for: its type and message, and where to find the traceback."""
    text = f"{type(error).__name__}: {error}" if str(error) else type(error).__name__
    return text if debug else f"{text} (run with --debug for the traceback)"


@contextmanager
def github_errors(settings: Settings, *, repo: str | None = None) -> Iterator[None]:
    """Turn GitHub's refusals, an unreachable API or an unusable App key into one sentence.

    ``repo`` is what a 404 is about (backfill's --repo); without it a 404 means the URL.
    """
    import requests
    from github.GithubException import GithubException
    from jwt.exceptions import InvalidKeyError

    try:
        yield
    except InvalidKeyError as error:
        if settings.github_app_private_key:
            what = "GITHUB_APP_PRIVATE_KEY is not a PEM private key"
        else:
            path = settings.github_app_private_key_file
            what = f"GITHUB_APP_PRIVATE_KEY_FILE {path} does not hold a PEM private key"
        raise UserError(
            f"{what}: use the .pem file GitHub generated for the App, whole, "
            "from -----BEGIN to -----END"
        ) from error
    except GithubException as error:
        raise CommandFailed(github_refusal(error, settings, repo)) from error
    except requests.Timeout as error:
        raise CommandFailed(
            f"GitHub at {settings.github_api_url} did not answer within "
            f"{settings.http_timeout_seconds:g} s: try again, or raise PLAYBOOK_HTTP_TIMEOUT"
        ) from error
    except requests.ConnectionError as error:
        found = re.search(r"\[Errno -?\d+\] ([^'\")\]]+)", str(error))
        why = found.group(1).strip().lower() if found else "no connection"
        raise CommandFailed(
            f"cannot reach GitHub at {settings.github_api_url} ({why}): "
            "check GITHUB_API_URL and the network"
        ) from error


def github_refusal(error: Any, settings: Settings, repo: str | None) -> str:
    """What a GitHub error answer means and what to change, naming the settings in use."""
    status = error.status
    said = error.data.get("message") if isinstance(error.data, dict) else None
    detail = f"{status}: {said}" if said else str(status)
    answer = f"{status} ({said})" if said else str(status)
    app = bool(settings.github_app_id)
    credentials = "GITHUB_TOKEN"
    if app:
        key = "PRIVATE_KEY" if settings.github_app_private_key else "PRIVATE_KEY_FILE"
        credentials = f"GITHUB_APP_ID and GITHUB_APP_{key}"
    if status == 401:
        return f"GitHub refused the credentials ({detail}): check {credentials}"
    headers = {k.lower(): v for k, v in (error.headers or {}).items()}
    if status in (403, 429) and headers.get("x-ratelimit-remaining") == "0":
        reset = headers.get("x-ratelimit-reset", "")
        when = (
            f"after {datetime.fromtimestamp(int(reset), UTC):%H:%M} UTC"
            if reset.isdigit()
            else "later"
        )
        return f"GitHub's rate limit for {credentials} is used up ({status}): try again {when}"
    who = "the App" if app else "GITHUB_TOKEN"
    if status == 403:
        return f"GitHub refused the request ({detail}): give {who} access to what it needs"
    if status == 404 and repo:
        installed = ", and that the App is installed on it" if app else ""
        return (
            f"GitHub has no repository {repo} that {who} can see ({detail}): "
            f"check --repo{installed}"
        )
    if status == 404:
        return f"GitHub answered {answer}: check GITHUB_API_URL ({settings.github_api_url})"
    return f"GitHub answered {answer}: try again later, or check GITHUB_API_URL"


class Context:
    """What every command needs: settings, the engine (opened on first use) and the actor."""

    def __init__(self, actor: str | None) -> None:
        self._actor = actor

    @cached_property
    def settings(self) -> Settings:
        """Settings from the environment, read once."""
        from bot.config import Settings

        settings = Settings()
        if settings.embeddings_enabled:
            # Searches rerank by meaning, and lessons this command writes get their jobs.
            from bot import embeddings

            embeddings.install(settings, warm=False)
        return settings

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
@click.option(
    "--debug",
    is_flag=True,
    envvar="PLAYBOOK_DEBUG",
    help="Print the traceback of an error before its one-line summary (or PLAYBOOK_DEBUG=1).",
)
@click.version_option(package_name="playbook-bot")
@click.pass_context
def main(ctx: click.Context, actor: str | None, debug: bool) -> None:
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
        raise UserError(invalid_settings(error)) from None


def echo_json(value: Any) -> None:
    """Print a value as indented JSON, datetimes as ISO 8601."""
    # C1, bidi and format characters as \\uXXXX: the same JSON, and nothing for a terminal to obey.
    click.echo(json_text(json.dumps(value, indent=2, default=_json_default, ensure_ascii=False)))


def _json_default(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    raise TypeError(f"cannot serialise {type(value).__name__}")


def note(message: str) -> None:
    """Print a remark for humans on stderr, keeping stdout clean for ids and JSON."""
    click.echo(message, err=True)

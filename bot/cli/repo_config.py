"""`playbook-bot config --repo`: a repository's settings in force, their sources, their problems."""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from bot.cli.base import CommandFailed, Context, UserError, echo_json, github_errors, pass_context
from bot.escapes import escaped

if TYPE_CHECKING:
    from sqlalchemy import Engine

    from bot.config import Settings
    from bot.repo_settings import Effective

# As GitHub spells them: an owner of 1 to 39 letters, digits and dashes, a name of up to 100.
_REPO = re.compile(r"[A-Za-z0-9][A-Za-z0-9-]{0,38}/[A-Za-z0-9._-]{1,100}")

# Where a value comes from, in --json (the text output says it in words).
INSTALLATION = "installation"

# Where a value the bot's settings leave at their default comes from, in words.
DEFAULT_WORDS = "default"

# A key a file may leave None: the bot's own setting applies, named by its variable.
_FALLBACKS = {
    "max_lessons": "PLAYBOOK_LESSONS_PER_TICKET",
    "min_relevance": "PLAYBOOK_MIN_RELEVANCE",
    "demote_policy": "PLAYBOOK_DEMOTE_POLICY",
    "capture_from_reviews": "PLAYBOOK_CAPTURE_FROM_REVIEWS",
    "holdout_percent": "PLAYBOOK_HOLDOUT_PERCENT",
    "context_budget": "PLAYBOOK_CONTEXT_BUDGET",
}


@dataclass(frozen=True)
class Shown:
    """One setting as the command shows it: its value and where that value comes from."""

    key: str
    value: Any
    source: str  # repository, organisation, installation or default
    where: str  # the same in words: the file, the variable, or "default"


@click.command()
@click.option("--repo", metavar="OWNER/NAME", help="The repository, e.g. octo-org/widgets.")
@click.option(
    "--file",
    "file",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    metavar="PATH",
    help="Check a local settings file offline instead, as the bot would read it.",
)
@click.option(
    "--schema",
    is_flag=True,
    help="Print the JSON Schema of the settings file (for editors) and exit.",
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of text.")
@click.option(
    "--cached",
    is_flag=True,
    help="Show the settings as the bot last read them, without asking GitHub.",
)
@click.option(
    "--check",
    is_flag=True,
    help="Exit 1 when a settings file has a problem or could not be read (for CI).",
)
@pass_context
def config(
    ctx: Context,
    repo: str | None,
    file: Path | None,
    schema: bool,
    as_json: bool,
    cached: bool,
    check: bool,
) -> None:
    """Show a repository's settings in force, where each comes from, and what is wrong.

    Reads .github/playbook-bot.yml of OWNER/NAME and of OWNER/.github from GitHub now, and
    stores what it read as a delivery would (a fixed file applies at once). A value the files
    leave unset is the bot's own setting, as this command's environment has it. --cached
    shows what the bot last read, without asking GitHub.

    A file with a problem never breaks a delivery: the bot keeps the last good settings of
    that file (or the defaults), so the exit status is 0 whatever the files hold. With
    --check it is 1 when a file has a problem or could not be read, after printing
    everything, so a CI step fails on a bad file. A wrong --repo, or no GitHub credentials
    without --cached, exits 2.

    --file PATH checks a local file instead, with the bot's parser and messages, and needs
    neither GitHub nor the database: one OK line, or one `PATH:LINE: key: message` line per
    problem (with --check, exit 1). With --repo too, a scope must be that owner's.
    --schema prints the file's JSON Schema.
    """
    _one_source(repo, file, schema, as_json=as_json, cached=cached, check=check)
    if repo is not None and not _REPO.fullmatch(repo):
        raise UserError(
            f"--repo must look like OWNER/NAME (such as octo-org/widgets), not {repo!r}"
        )
    if schema:
        from playbook.repos.schema import schema_text

        click.echo(schema_text(), nl=False)
        return
    if file is not None:
        from bot.cli import settings_file

        parsed = settings_file.check_file(file, repo)
        settings_file.show(file, parsed, repo=repo, as_json=as_json, check=check)
        return
    assert repo is not None  # _one_source made sure
    # Here, not above: --file and --schema need neither GitHub's client nor the database's.
    from bot.repo_settings import cached as stored

    if cached:
        found = stored(ctx.engine, repo)
        if found is None:
            _nothing_stored(repo, as_json)
            return
    else:
        found = _read_now(ctx, repo)
    shown = settings_shown(found, ctx.settings, ctx.engine)
    if as_json:
        echo_json(
            {
                "repo": found.repo,
                "settings": {s.key: {"value": s.value, "source": s.source} for s in shown},
                "problems": [problem.as_dict() for problem in found.problems],
                "error": found.error,
                "read_at": found.read_at,
            }
        )
    else:
        for line in report(found, shown, cached=cached):
            click.echo(line)
    if check and (found.problems or found.error):
        raise CommandFailed(_failed(found))


def _one_source(
    repo: str | None, file: Path | None, schema: bool, *, as_json: bool, cached: bool, check: bool
) -> None:
    """What to show: a repository's settings, a local file, or the schema (a usage error else)."""
    if schema and (repo or file or as_json or cached or check):
        raise click.UsageError("--schema takes no other option")
    if file is not None and cached:
        raise click.UsageError("--cached reads a repository's stored settings, not --file")
    if not (repo or file or schema):
        raise click.UsageError("give --repo OWNER/NAME, --file PATH or --schema")


def _read_now(ctx: Context, repo: str) -> Effective:
    """Both files read from GitHub now (and stored), or a one-line error naming the fix."""
    from bot.github import GitHubClients
    from bot.repo_settings import effective, installation_for
    from bot.services import Services

    settings = ctx.settings
    missing = GitHubClients(settings).missing()
    if missing is not None:
        # effective() would quietly answer the defaults: the user asked for the files.
        raise UserError(
            f"GitHub is not configured, so {repo}'s settings cannot be read: set {missing} "
            "(or add --cached for the settings as the bot last read them)"
        )
    services = Services(engine=ctx.engine, settings=settings)
    with github_errors(settings, repo=repo), _quiet("bot.repo_settings"):
        installation = installation_for(services, repo)
        return effective(services, repo, installation, refresh=True)


@contextmanager
def _quiet(name: str) -> Iterator[None]:
    """Without the logger's warnings: each problem it would log is printed by the command."""
    logger = logging.getLogger(name)
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)


def _nothing_stored(repo: str, as_json: bool) -> None:
    if as_json:
        echo_json({"repo": repo, "settings": None, "problems": [], "error": None, "read_at": None})
        return
    click.echo(
        f"{repo}: no settings stored yet (the bot reads them on the repository's next issue "
        "or push); run without --cached to read them now"
    )


def _failed(found: Effective) -> str:
    """--check's one line: how many problems, or that the files could not be read."""
    count = len(found.problems)
    if count:
        return f"{found.repo}: {count} problem{'s' if count != 1 else ''} in its settings files"
    return f"{found.repo}: its settings files could not be read ({found.error})"


def settings_shown(found: Effective, settings: Settings, engine: Engine) -> list[Shown]:
    """Every effective setting with its value and source, in the order of the settings model."""
    from bot.repo_settings import org_file
    from playbook.repos.settings import DEFAULT, FILE_PATH, ORGANISATION, REPOSITORY

    values = found.settings.model_dump(mode="json")
    flat = {key: value for key, value in values.items() if key != "agents_md"}
    flat |= {f"agents_md.{key}": value for key, value in values["agents_md"].items()}
    files = {
        REPOSITORY: f"repository file {FILE_PATH}",
        ORGANISATION: f"organisation file {org_file(found.repo)}",
        DEFAULT: "default",
    }
    shown = []
    for key, origin in found.sources.items():
        value, source = flat.get(key), origin
        where = files.get(origin, origin)
        if key == "scope" and value is None:
            value, source, where = found.repo, DEFAULT, "the repository itself"
        elif key in _FALLBACKS and value is None:
            value, where = _installation_value(key, settings, engine)
            # The bot's own value is the installation's only when someone set it.
            source = DEFAULT if where == DEFAULT_WORDS else INSTALLATION
        shown.append(Shown(key, value, source, where))
    return shown


def _set(settings: Settings, key: str) -> bool:
    """True when the bot's setting for file key ``key`` was given (environment, .env, code),
    False when it is the default: only then is its variable named as the value's source."""
    return _SETTING_FIELDS.get(key, key) in settings.model_fields_set


# The bot's setting behind a file key, where the names differ.
_SETTING_FIELDS = {"max_lessons": "lessons_per_ticket"}


def _installation_value(key: str, settings: Settings, engine: Engine) -> tuple[Any, str]:
    """The bot's own value of ``key`` and its variable, or "default" when nobody set it (the
    running experiment's, for the share held out, when someone started it by hand: that
    period overrides the variable)."""
    variable = _FALLBACKS[key]
    if key == "holdout_percent":
        return _experiment_share(settings, engine)
    value = {
        "max_lessons": settings.lessons_per_ticket,
        "min_relevance": settings.min_relevance,
        "demote_policy": settings.demote_policy.value,
        "capture_from_reviews": settings.capture_from_reviews.value,
        "context_budget": settings.context_budget,
    }[key]
    return value, f"{variable}={value}" if _set(settings, key) else DEFAULT_WORDS


def _experiment_share(settings: Settings, engine: Engine) -> tuple[int, str]:
    """The share held out now, read without starting or stopping anything: a period someone
    started by hand wins over PLAYBOOK_HOLDOUT_PERCENT, and one they stopped stays stopped
    (as `holdout.percent_in_force` decides when a delivery comes)."""
    from playbook import db
    from playbook.experiment import assignment, holdout

    variable = f"PLAYBOOK_HOLDOUT_PERCENT={settings.holdout_percent}"
    with db.transaction(engine) as session:
        running = assignment.running(session)
        periods = assignment.periods(session)
    if running is not None and running.started_by != holdout.SETTING:
        return running.percent, f"the experiment {running.started_by} started"
    stopper = periods[-1].stopped_by if periods and running is None else None
    if settings.holdout_percent and stopper not in (None, holdout.SETTING):
        return 0, f"the experiment {stopper} stopped (over {variable})"
    return settings.holdout_percent, variable if _set(
        settings, "holdout_percent"
    ) else DEFAULT_WORDS


def report(found: Effective, shown: list[Shown], *, cached: bool = False) -> list[str]:
    """The text output: a heading, one line per setting, then the problems and the error."""
    if found.read_at is None:
        read = "never read from GitHub"
    else:
        from playbook import clock

        read = f"read {clock.to_utc(found.read_at):%Y-%m-%d %H:%M} UTC"
    lines = [f"Settings of {found.repo} ({read}{', as stored' if cached else ''}):"]
    values = [_text(s.value) for s in shown]
    key_width = max((len(s.key) for s in shown), default=0)
    value_width = max((len(v) for v in values), default=0)
    for setting, value in zip(shown, values, strict=True):
        where = escaped(setting.where)
        lines.append(f"  {setting.key:<{key_width}}  {value:<{value_width}}  {where}")
    if found.problems:
        count = len(found.problems)
        lines.append(
            f"{count} problem{'s' if count != 1 else ''} (until fixed, the bot keeps the last "
            "good settings of that file, or the defaults):"
        )
        lines += [f"  {escaped(problem)}" for problem in found.problems]
    if found.error:
        lines.append(
            f"Not read: {escaped(found.error)} (the settings above are the last good ones, "
            "or the defaults)"
        )
    return lines


def _text(value: Any) -> str:
    """A value as the YAML file would spell it."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return "[" + ", ".join(escaped(item) for item in value) + "]"
    # A file's text cannot move the cursor, recolour the terminal or reorder the line.
    return escaped(value)

"""`playbook-bot doctor`: check each configured connection and name the fix for each problem."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta

from sqlalchemy import Engine

from bot import model_client, repo_settings
from bot.config import Settings
from bot.github import GitHubClients
from bot.jira import JiraClient
from bot.logs import redact
from playbook import db
from playbook.deliveries import heartbeats
from playbook.errors import DatabaseUnavailable, PlaybookError
from playbook.lessons import credential_scan
from playbook.repos.settings import FILE_PATH

# A doctor line names this many repositories; `config --repo` shows each in full.
MAX_REPOS_SHOWN = 5


@dataclass(frozen=True)
class Check:
    """One line of the report: ok, off (not configured), warn or fail, and what it means."""

    name: str
    status: str
    detail: str


def _first_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return text[0][:200] if text else type(error).__name__


def run_checks(settings: Settings) -> Iterator[Check]:
    """Every check, in the order a person would fix them."""
    try:
        engine = db.make_engine(settings.database_url)
    except (PlaybookError, DatabaseUnavailable) as error:
        yield Check("database", "fail", str(error))
    else:
        try:
            yield from _database(engine, settings)
        finally:
            engine.dispose()  # the checks are all doctor needs the database for

    if settings.github_webhook_secret:
        yield Check("GitHub webhook", "ok", "GITHUB_WEBHOOK_SECRET is set")
    elif settings.insecure_skip_verify:
        yield Check(
            "GitHub webhook",
            "fail",
            "signatures are NOT checked (PLAYBOOK_INSECURE_SKIP_VERIFY); set "
            "GITHUB_WEBHOOK_SECRET and unset PLAYBOOK_INSECURE_SKIP_VERIFY outside local "
            "development",
        )
    else:
        yield Check(
            "GitHub webhook", "off", "set GITHUB_WEBHOOK_SECRET to receive GitHub deliveries"
        )

    github = GitHubClients(settings)
    if not github.configured:
        yield Check("GitHub API", "off", f"comments on GitHub are skipped; set {github.missing()}")
    else:
        try:
            if settings.github_app_id:
                app = github.integration().get_app()
                installations = github.integration().get_installations().totalCount
                where = f"{settings.github_api_url}, {installations} installation(s)"
                yield Check("GitHub API", "ok", f"App {app.slug or app.id} at {where}")
            else:
                user = github.for_installation(None).get_user().login
                yield Check("GitHub API", "ok", f"token of {user} at {settings.github_api_url}")
        except Exception as error:  # any failure is a finding to report, not a crash
            yield Check(
                "GitHub API",
                "fail",
                f"{_first_line(error)}; check GITHUB_API_URL and the App id/key or GITHUB_TOKEN",
            )

    jira = JiraClient(settings)
    if not jira.configured:
        yield Check("Jira API", "off", f"comments on Jira are skipped; set {jira.missing()}")
    else:
        try:
            me = jira.client().myself()
            who = me.get("displayName") or me.get("emailAddress") or me.get("name")
            yield Check("Jira API", "ok", f"signed in to {settings.jira_url} as {who}")
        except Exception as error:  # any failure is a finding to report, not a crash
            yield Check(
                "Jira API",
                "fail",
                f"{_first_line(error)}; check JIRA_URL and JIRA_EMAIL/JIRA_API_TOKEN or JIRA_PAT",
            )
    if settings.jira_webhook_secret:
        yield Check("Jira webhook", "ok", "JIRA_WEBHOOK_SECRET is set")
    elif settings.jira_allow_unsigned:
        yield Check(
            "Jira webhook",
            "off",
            "Jira deliveries are accepted unsigned (PLAYBOOK_JIRA_ALLOW_UNSIGNED); "
            "set JIRA_WEBHOOK_SECRET",
        )
    else:
        yield Check(
            "Jira webhook",
            "off",
            "/webhooks/jira refuses every delivery (401); set JIRA_WEBHOOK_SECRET",
        )
    yield _model(settings)
    if settings.api_token:
        yield Check("agent API", "ok", "PLAYBOOK_API_TOKEN is set")
    else:
        yield Check("agent API", "off", "/api/v1 answers 503; set PLAYBOOK_API_TOKEN to enable it")
    if settings.metrics_token:
        yield Check("metrics", "ok", "/metrics answers PLAYBOOK_METRICS_TOKEN")
    elif settings.api_token:
        yield Check(
            "metrics",
            "ok",
            "/metrics answers PLAYBOOK_API_TOKEN; set PLAYBOOK_METRICS_TOKEN to give the "
            "scraper a token that opens nothing else",
        )
    else:
        yield Check("metrics", "off", "/metrics answers 503; set PLAYBOOK_METRICS_TOKEN")


def _model(settings: Settings) -> Check:
    """The model endpoint: reachable, serving the model, answering JSON to one tiny call.

    Graded as GitHub and Jira are: off when unset, a failure when set and not working. No line
    shows the key, and the endpoint is shown without the credentials its URL may carry.
    """
    base_url, model = settings.model_base_url, settings.model_name
    if not (base_url and model):
        if not (base_url or model):
            return Check(
                "model",
                "off",
                "off; set PLAYBOOK_MODEL_BASE_URL and PLAYBOOK_MODEL to rate lessons and "
                "propose them from reviews with a model",
            )
        # Half a configuration is a mistake more often than a choice.
        missing = "PLAYBOOK_MODEL" if base_url else "PLAYBOOK_MODEL_BASE_URL"
        return Check("model", "warn", f"off, {missing} is not set; set it to use the model")
    try:
        client = model_client.make_client(
            base_url, settings.model_key, settings.model_timeout_seconds
        )
        problem = model_client.check(client, model)
    except Exception as error:  # any failure is a finding to report, not a crash
        problem = f"{redact(_first_line(error))}; check PLAYBOOK_MODEL_BASE_URL"
    if problem is not None:
        return Check("model", "fail", _without_key(problem, settings.model_key))
    where = f"{model} at {settings.model_endpoint}"
    calls, tokens = settings.model_daily_calls, settings.model_daily_tokens
    budget = f"daily budget {calls:,} calls and {tokens:,} tokens"
    if not calls or not tokens:
        empty = "PLAYBOOK_MODEL_DAILY_TOKENS" if calls else "PLAYBOOK_MODEL_DAILY_CALLS"
        return Check(
            "model", "warn", f"{where} answers, but a {budget} allows no call; set {empty} above 0"
        )
    diffs = "diffs are sent" if settings.model_send_diffs else "diffs are not sent"
    return Check("model", "ok", f"{where} answers JSON ({budget}; {diffs})")


def _without_key(text: str, key: str | None) -> str:
    """``text`` with the API key masked, however short it is (redact skips short secrets)."""
    return text.replace(key, "***") if key else text


def _database(engine: Engine, settings: Settings) -> Iterator[Check]:
    """The schema, whether a worker processes the inbox, and the repositories' settings."""
    try:
        current = db.current_revision(engine)
    except (PlaybookError, DatabaseUnavailable) as error:
        yield Check("database", "fail", str(error))
        return
    if current != db.SCHEMA_HEAD:
        yield _schema_behind(engine, current)
        if engine.dialect.name == "sqlite":
            yield Check("worker", "off", "none has run yet; `playbook-bot serve` starts one")
        return
    # Backend and name only: the URL may carry a user and a password.
    where = f"{engine.url.get_backend_name()} database {engine.url.database}"
    yield Check("database", "ok", f"{where} at schema {current}")
    yield from _worker(engine, settings)
    yield _repo_settings(engine)
    yield _stored_credentials(engine)


def _worker(engine: Engine, settings: Settings) -> Iterator[Check]:
    """Whether a worker reported within the heartbeat timeout."""
    timeout = settings.worker_heartbeat_timeout
    try:
        workers, last = heartbeats.fresh(engine, timedelta(seconds=timeout))
    except (PlaybookError, DatabaseUnavailable) as error:
        yield Check("worker", "fail", str(error))
        return
    if workers:
        yield Check("worker", "ok", f"{workers} worker(s) reported in the last {timeout:g} s")
        return
    # Not a failure: before the first start, or between deployments, none is running.
    since = f"the last report was at {last:%Y-%m-%d %H:%M} UTC" if last else "none has run yet"
    yield Check(
        "worker",
        "off",
        f"no worker reported in the last {timeout:g} s ({since}); deliveries wait in the "
        "inbox until `playbook-bot serve` or `playbook-bot worker` runs",
    )


def _repo_settings(engine: Engine) -> Check:
    """Repositories whose settings files have problems, as last read (no GitHub call).

    A warning, not a failure: a bad file never breaks a delivery, the bot keeps its last good
    settings (or the defaults) until someone fixes it.
    """
    try:
        found = repo_settings.problems_everywhere(engine)
    except (PlaybookError, DatabaseUnavailable) as error:
        return Check("repository settings", "fail", str(error))
    if not found:
        return Check("repository settings", "ok", f"no problem in any {FILE_PATH} read so far")
    shown = []
    for repo, problems, error in found[:MAX_REPOS_SHOWN]:
        first = str(problems[0]) if problems else f"not read: {error}"
        more = len(problems) - 1
        also = f" (and {more} more)" if more > 0 else ""
        fix = f"run `playbook-bot config --repo {repo}`"
        shown.append(f"{repo}: {_first_line_of(first)}{also}; {fix}")
    rest = len(found) - MAX_REPOS_SHOWN
    if rest > 0:
        shown.append(f"and {rest} more repositories")
    who = "1 repository uses its" if len(found) == 1 else f"{len(found)} repositories use their"
    return Check(
        "repository settings",
        "warn",
        f"{who} last good settings (or the defaults) until fixed: " + "; ".join(shown),
    )


def _stored_credentials(engine: Engine) -> Check:
    """Lessons stored with a credential in them (before the rule, or written straight to SQL).

    A warning: the lessons keep working, but their text is shown in public comments.
    """
    try:
        with db.transaction(engine) as session:
            lessons = {entry.bullet_id for entry in credential_scan.holding(session)}
    except (PlaybookError, DatabaseUnavailable) as error:
        return Check("credentials", "fail", str(error))
    if not lessons:
        return Check("credentials", "ok", "no lesson holds a credential")
    count = "1 lesson holds" if len(lessons) == 1 else f"{len(lessons)} lessons hold"
    return Check(
        "credentials",
        "warn",
        f"{count} a credential; run `playbook-bot scan` to list them, then deprecate and "
        "edit each (and rotate any credential that was real)",
    )


def _first_line_of(text: str) -> str:
    """One line of at most 200 characters: a problem may quote a file's text."""
    flat = " ".join(text.split())
    return flat if len(flat) <= 200 else flat[:199] + "…"


def _schema_behind(engine: Engine, current: str | None) -> Check:
    """A schema that is not this release's: fine for SQLite, which migrates on first use."""
    where = f"{engine.url.get_backend_name()} database {engine.url.database}"
    if current is not None and not _known_revision(engine, current):
        return Check(
            "database",
            "fail",
            f"schema is {current}, newer than this playbook-bot knows ({db.SCHEMA_HEAD}): "
            "install the release that wrote it, or point PLAYBOOK_DATABASE_URL elsewhere",
        )
    if engine.dialect.name == "sqlite":
        # By design: SQLite's first use creates or migrates its schema (db.ensure_schema).
        state = "new" if current is None else f"at schema {current}"
        return Check(
            "database",
            "ok",
            f"{where} is {state}; its first use brings it to {db.SCHEMA_HEAD} "
            "(or run `playbook-bot db upgrade` now)",
        )
    return Check(
        "database",
        "fail",
        f"schema is {current or 'empty'}, needs {db.SCHEMA_HEAD}: run `playbook-bot db upgrade`",
    )


def _known_revision(engine: Engine, revision: str) -> bool:
    """Whether this release's migrations know ``revision`` (a newer release may have run)."""
    from alembic.script import ScriptDirectory
    from alembic.util import CommandError

    try:
        ScriptDirectory.from_config(db.alembic_config(engine)).get_revision(revision)
    except CommandError:
        return False
    return True

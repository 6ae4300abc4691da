"""Per-repository settings: `.github/playbook-bot.yml` read through the GitHub contents API.

Read with the installation's client, kept in the database (one copy for every process),
read again when a push to the default branch touches the file or after REFRESH_AFTER. A
file that is bad, or GitHub that cannot be reached, never breaks a delivery: the last good
values (or the defaults) apply and the problem is recorded where `config --repo`, `doctor`,
the web page and a metric show it.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import timedelta
from typing import TYPE_CHECKING, Any

import requests
from github.GithubException import GithubException, UnknownObjectException
from sqlalchemy import Engine
from sqlalchemy.exc import IntegrityError

from bot.github import GitHubClients, NotConfigured
from playbook import clock, db
from playbook.repos import settings as repo_files
from playbook.repos import stored
from playbook.repos.settings import FILE_PATH, ORG_REPO, Problem, RepoSettings

if TYPE_CHECKING:
    from bot.services import Services

log = logging.getLogger(__name__)

# The bound: a change never waits longer than this to apply, push or no push.
REFRESH_AFTER = timedelta(minutes=10)
# After a failed read: GitHub is asked again this much later, not by every delivery meanwhile.
RETRY_AFTER = timedelta(minutes=1)


@dataclass(frozen=True)
class Effective:
    """A repository's settings in force, where each value comes from, and what is wrong."""

    repo: str
    settings: RepoSettings
    sources: dict[str, str] = field(default_factory=dict)
    problems: list[Problem] = field(default_factory=list)
    # Why the files could not be read (the values are then the last good, or the defaults).
    error: str | None = None
    read_at: Any = None

    @property
    def scope(self) -> str:
        """The lessons scope of this repository's tickets."""
        return self.settings.scope_for(self.repo)


@dataclass(frozen=True)
class _Read:
    sha: str | None
    content: bytes | None


def org_file(repo: str) -> str:
    """How the organisation's defaults file is named in problems and sources."""
    owner = repo.split("/", 1)[0]
    return f"{owner}/{ORG_REPO}:{FILE_PATH}"


def installation_for(services: Services, repo: str) -> int | None:
    """The App installation that can read ``repo`` (None with a personal token)."""
    clients = _clients(services)
    if not services.settings.github_app_id or not clients.configured:
        return None
    owner, name = repo.split("/", 1)
    return clients.integration().get_repo_installation(owner, name).id


def cached(engine: Engine, repo: str) -> Effective | None:
    """The settings as last read, without asking GitHub (for requests that must stay fast)."""
    with db.transaction(engine) as session:
        known = stored.get(session, repo)
    return _effective(repo, known) if known else None


def effective(
    services: Services,
    repo: str,
    installation_id: int | None,
    *,
    refresh: bool = False,
    store: bool = True,
) -> Effective:
    """``repo``'s settings in force, read from GitHub when due (or when ``refresh``).

    Without ``store`` (a dry run), what is read is used and not kept.
    """
    engine = services.engine
    if _clients(services).missing_for(installation_id) is not None or services.out.dry_run:
        # Nothing can be read (no credentials, or a dry run that sends nothing): defaults,
        # and no write per delivery to say so.
        return _effective(repo, {})
    with db.transaction(engine) as session:
        known = stored.get(session, repo)
    now = clock.now()
    due = refresh or not known
    if not due:
        wanted = known["stale"] or known["read_at"] is None
        wanted = wanted or now - known["read_at"] >= REFRESH_AFTER
        # Only after a failed read does the next wait a minute; a push is read at once.
        tried = known.get("tried_at") if known.get("error") else None
        due = wanted and (tried is None or now - tried >= RETRY_AFTER)
    if due:
        known = _read_and_store(services, repo, installation_id, known, store=store)
    return _effective(repo, known)


def mark_stale(engine: Engine, repo: str | None = None, *, owner: str | None = None) -> int:
    """A push changed a settings file: read ``repo``'s (or all of ``owner``'s) again."""
    with db.transaction(engine) as session:
        return stored.mark_stale(session, repo, owner=owner)


def known_repos(engine: Engine) -> list[tuple[str, int | None]]:
    """Every repository whose settings the bot has read, with its installation."""
    with db.transaction(engine) as session:
        return stored.known(session)


def problems_everywhere(engine: Engine) -> list[tuple[str, list[Problem], str | None]]:
    """Each repository whose settings files have problems (or could not be read)."""
    with db.transaction(engine) as session:
        rows = stored.troubled(session)
    return [
        (row["repo"], [Problem.from_dict(p) for p in row["problems"]], row["error"]) for row in rows
    ]


def _effective(repo: str, values: dict[str, Any]) -> Effective:
    problems = [Problem.from_dict(p) for p in values.get("problems") or []]
    try:
        settings, sources = repo_files.resolve(values.get("org_values"), values.get("repo_values"))
    except ValueError:
        # Two good files can only disagree if the rules changed since they were stored.
        settings, sources = repo_files.resolve(None, None)
    return Effective(repo, settings, sources, problems, values.get("error"), values.get("read_at"))


def _clients(services: Services) -> GitHubClients:
    github = getattr(services.out, "github", None)
    return github if isinstance(github, GitHubClients) else GitHubClients(services.settings)


def _read_and_store(
    services: Services,
    repo: str,
    installation_id: int | None,
    known: dict[str, Any],
    *,
    store: bool = True,
) -> dict[str, Any]:
    """Read both files (outside any transaction: no lock is held over HTTP) and store them."""
    fresh = dict(known)
    fresh["installation_id"] = installation_id or known.get("installation_id")
    owner = repo.split("/", 1)[0]
    try:
        client = _clients(services).for_installation(fresh["installation_id"])
        own = _get(client, repo)
        org = _get(client, f"{owner}/{ORG_REPO}") if not repo.endswith(f"/{ORG_REPO}") else None
    except NotConfigured as missing:
        # No GitHub: the defaults (and nothing to show as a problem of the files).
        fresh["error"] = f"not read: {missing}"
        return _store(services.engine, repo, fresh, read=False, keep=store)
    except (GithubException, requests.RequestException) as error:
        fresh["error"] = _why(error)
        log.warning("settings of %s not read (%s); using the last good ones", repo, fresh["error"])
        return _store(services.engine, repo, fresh, read=False, keep=store)
    problems: list[dict[str, Any]] = []
    for layer, got, label in (("repo", own, FILE_PATH), ("org", org, org_file(repo))):
        if got is None or got.content is None:
            fresh[f"{layer}_sha"], fresh[f"{layer}_values"] = None, None
            continue
        if got.sha == known.get(f"{layer}_sha"):
            # The same blob as last time: its verdict stands (the file is not parsed again).
            problems += [p for p in known.get("problems") or [] if p.get("file") == label]
            continue
        parsed = repo_files.parse(got.content, label, owner)
        fresh[f"{layer}_sha"] = got.sha
        if parsed.values is not None:
            fresh[f"{layer}_values"] = parsed.values
        problems += [p.as_dict() for p in parsed.problems]
        for problem in parsed.problems:
            log.warning("settings of %s: %s (the last good settings apply)", repo, problem)
    fresh["problems"], fresh["error"] = problems, None
    return _store(services.engine, repo, fresh, read=True, keep=store)


def _get(client: Any, repo: str) -> _Read | None:
    """The settings file of ``repo``, or None when it (or the repository) does not exist."""
    try:
        found = client.get_repo(repo).get_contents(FILE_PATH)
    except UnknownObjectException:
        return None
    if isinstance(found, list):
        return _Read(None, b"")  # a directory by that name: parsed as an empty, bad file
    if (found.size or 0) > repo_files.MAX_FILE_BYTES:
        return _Read(found.sha, b"\0" * (repo_files.MAX_FILE_BYTES + 1))
    return _Read(found.sha, found.decoded_content)


def _why(error: Exception) -> str:
    if isinstance(error, GithubException):
        said = error.data.get("message") if isinstance(error.data, dict) else None
        if error.status == 403:
            return (
                f"GitHub refused to show {FILE_PATH} (403{': ' + said if said else ''}): "
                "grant the App the Contents (read) permission"
            )
        return f"GitHub answered {error.status}{': ' + said if said else ''}"
    return f"GitHub could not be reached ({type(error).__name__})"


def _store(
    engine: Engine, repo: str, fresh: dict[str, Any], *, read: bool, keep: bool = True
) -> dict[str, Any]:
    now = clock.now()
    values = {
        "installation_id": fresh.get("installation_id"),
        "repo_sha": fresh.get("repo_sha"),
        "org_sha": fresh.get("org_sha"),
        "repo_values": fresh.get("repo_values"),
        "org_values": fresh.get("org_values"),
        "problems": fresh.get("problems") or [],
        "error": fresh.get("error"),
        "tried_at": now,
    }
    if read:
        values |= {"read_at": now, "stale": False}
        fresh["read_at"] = now
    if not keep:
        return fresh
    for _ in range(2):
        try:
            with db.transaction(engine) as session:
                stored.put(session, repo, values)
            break
        except IntegrityError:
            continue  # another process stored it first: update theirs
    return fresh

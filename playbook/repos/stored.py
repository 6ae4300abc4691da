"""The settings files as last read, per repository: the rows `repo_settings` keeps."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from playbook import scopes
from playbook.models import RepoSettingsRow
from playbook.repos.settings import RepoSettings, resolve

FIELDS = (
    "installation_id",
    "repo_sha",
    "org_sha",
    "repo_values",
    "org_values",
    "problems",
    "read_at",
    "tried_at",
    "error",
)


def snapshot(row: RepoSettingsRow | None) -> dict[str, Any]:
    """The row's values as a plain dict (empty without a row), usable after the session ends."""
    if row is None:
        return {}
    values = {name: getattr(row, name) for name in FIELDS}
    values["problems"] = list(values["problems"] or [])
    values["stale"] = row.stale
    return values


def get(session: Session, repo: str) -> dict[str, Any]:
    """What is stored for ``repo`` (see `snapshot`)."""
    return snapshot(session.get(RepoSettingsRow, repo))


def put(session: Session, repo: str, values: dict[str, Any]) -> None:
    """Store ``repo``'s values, inserting its row the first time."""
    row = session.get(RepoSettingsRow, repo)
    if row is None:
        session.add(RepoSettingsRow(repo=repo, **values))
        return
    for key, value in values.items():
        setattr(row, key, value)


def mark_stale(session: Session, repo: str | None = None, *, owner: str | None = None) -> int:
    """Make ``repo``'s (or each of ``owner``'s repositories') files be read again; how many."""
    statement = update(RepoSettingsRow).values(stale=True)
    if repo is not None:
        statement = statement.where(RepoSettingsRow.repo == repo)
    elif owner is not None:
        statement = statement.where(RepoSettingsRow.repo.startswith(f"{owner}/", autoescape=True))
    return session.execute(statement).rowcount or 0


def known(session: Session) -> list[tuple[str, int | None]]:
    """Every repository with stored settings, with its installation, by name."""
    rows = session.execute(
        select(RepoSettingsRow.repo, RepoSettingsRow.installation_id).order_by(RepoSettingsRow.repo)
    )
    return [(repo, installation) for repo, installation in rows]


def troubled(session: Session) -> list[dict[str, Any]]:
    """Each repository whose files have problems or could not be read: repo, problems, error."""
    rows = session.scalars(select(RepoSettingsRow).order_by(RepoSettingsRow.repo))
    return [
        {"repo": row.repo, "problems": list(row.problems or []), "error": row.error}
        for row in rows
        if row.problems or row.error
    ]


def holdout_percent(session: Session, ticket_key: str | None) -> int | None:
    """The `holdout_percent` a GitHub ticket's repository set, as last read (None: none set).

    The doors that compute a ticket's arm before its delivery (an agent's search) must use
    the share its delivery will use.
    """
    repository = scopes.scope_of(ticket_key)
    if repository is None or "/" not in repository:
        return None  # a Jira key, or no scope's: no repository settings apply
    chosen = _last_read(session, repository)
    return chosen.holdout_percent if chosen is not None else None


def lessons_scope(session: Session, repo: str) -> str | None:
    """The `scope:` ``repo``'s settings set, as last read (None: none set, or never read)."""
    chosen = _last_read(session, repo)
    return chosen.scope if chosen is not None else None


def _last_read(session: Session, repo: str) -> RepoSettings | None:
    """``repo``'s settings as last read and merged (None: never read, or unreadable)."""
    values = get(session, repo)
    if not values:
        return None
    try:
        chosen, _ = resolve(values.get("org_values"), values.get("repo_values"))
    except ValueError:
        return None
    return chosen

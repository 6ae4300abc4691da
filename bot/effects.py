"""Side effects on GitHub and Jira, live or dry-run, each logged with what happened."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Protocol

from github.GithubException import GithubException, UnknownObjectException
from jira.exceptions import JIRAError
from sqlalchemy import Engine

from bot.config import Settings
from bot.github import GitHubClients, NotConfigured
from bot.jira import JiraClient
from bot.logs import current_delivery
from playbook import clock, db
from playbook.models import SideEffect

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TicketRef:
    """Where a ticket lives: a GitHub issue or PR (``owner/repo#12``) or a Jira issue."""

    target: str  # github | jira
    key: str
    repo: str | None = None
    number: int | None = None
    installation_id: int | None = None

    @classmethod
    def github(cls, repo: str, number: int, installation_id: int | None) -> TicketRef:
        """A GitHub issue or pull request."""
        return cls("github", f"{repo}#{number}", repo, number, installation_id)

    @classmethod
    def jira(cls, key: str) -> TicketRef:
        """A Jira issue."""
        return cls("jira", key)


class Effects(Protocol):
    """What handlers may do outside the database."""

    def upsert_comment(self, ref: TicketRef, body: str, existing_id: str | None) -> str | None:
        """Post a comment, or edit ``existing_id``; returns the comment id."""

    def reply(self, ref: TicketRef, body: str) -> None:
        """Post a one-off reply."""

    def can_change_playbook(self, ref: TicketRef, user: str) -> bool:
        """Whether ``user`` may change the playbook from this ticket."""

    def flagged_for_review(self, ref: TicketRef) -> bool:
        """Whether the ticket carries the human-review flag."""


def log_effect(
    engine: Engine, ref: TicketRef, action: str, status: str, detail: str | None = None
) -> None:
    """Append to the side-effect log (done, skipped with the setting to fix, or dry run)."""
    with db.transaction(engine) as session:
        session.add(
            SideEffect(
                delivery_id=None if current_delivery.get() == "-" else current_delivery.get(),
                target=ref.target,
                action=action,
                ticket_key=ref.key,
                status=status,
                detail=detail,
                at=clock.now(),
            )
        )


class LiveEffects:
    """Talks to GitHub through PyGithub and to Jira through the `jira` client."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.github = GitHubClients(settings)
        self.jira = JiraClient(settings)

    def _issue(self, ref: TicketRef):
        client = self.github.for_installation(ref.installation_id)
        return client.get_repo(ref.repo or "").get_issue(ref.number or 0)

    def upsert_comment(self, ref: TicketRef, body: str, existing_id: str | None) -> str | None:
        """Post or edit the bot's comment; a comment deleted by a person is posted anew."""
        if ref.target == "jira":
            client = self.jira.client()
            if existing_id:
                try:
                    client.comment(ref.key, existing_id).update(body=body)
                    return existing_id
                except JIRAError as error:
                    if error.status_code != 404:
                        raise
            return str(client.add_comment(ref.key, body).id)
        issue = self._issue(ref)
        if existing_id:
            try:
                issue.get_comment(int(existing_id)).edit(body)
                return existing_id
            except UnknownObjectException:
                pass
        return str(issue.create_comment(body).id)

    def reply(self, ref: TicketRef, body: str) -> None:
        """Post a reply comment."""
        if ref.target == "jira":
            self.jira.client().add_comment(ref.key, body)
        else:
            self._issue(ref).create_comment(body)

    def can_change_playbook(self, ref: TicketRef, user: str) -> bool:
        """Write access on the repo (GitHub) or a listed user (Jira)."""
        if ref.target == "jira":
            return user.lower() in self.settings.jira_allowed
        client = self.github.for_installation(ref.installation_id)
        try:
            permission = client.get_repo(ref.repo or "").get_collaborator_permission(user)
        except GithubException as error:
            if error.status in (403, 404):
                return False
            raise
        return permission in ("admin", "maintain", "write")

    def flagged_for_review(self, ref: TicketRef) -> bool:
        """The review label on the issue, or the configured Jira field set."""
        label = self.settings.review_label.lower()
        if ref.target == "github":
            return any(lbl.name.lower() == label for lbl in self._issue(ref).labels)
        issue = self.jira.client().issue(ref.key)
        labels = [str(lbl).lower() for lbl in (getattr(issue.fields, "labels", None) or [])]
        if label in labels:
            return True
        field_name = self.settings.jira_review_field
        if not field_name:
            return False
        ids = [f["id"] for f in self.jira.client().fields() if f["name"] == field_name]
        return any(getattr(issue.fields, field_id, None) not in (None, "", []) for field_id in ids)


@dataclass
class DryRunEffects:
    """Prints (and keeps) what would be posted; used by `demo` and for trying the bot out."""

    echo: bool = True
    posted: list[tuple[str, str, str]] = field(default_factory=list)
    writers: set[str] = field(default_factory=set)
    flagged: set[str] = field(default_factory=set)

    def upsert_comment(self, ref: TicketRef, body: str, existing_id: str | None) -> str | None:
        """Record the comment instead of posting it."""
        action = "edit comment" if existing_id else "comment"
        self.posted.append((action, ref.key, body))
        if self.echo:
            print(f"\n--- would {action} on {ref.key} ({ref.target}) ---\n{body}\n")
        return existing_id or f"dry-run-{len(self.posted)}"

    def reply(self, ref: TicketRef, body: str) -> None:
        """Record the reply instead of posting it."""
        self.posted.append(("reply", ref.key, body))
        if self.echo:
            print(f"\n--- would reply on {ref.key} ---\n{body}\n")

    def can_change_playbook(self, ref: TicketRef, user: str) -> bool:
        """Only the users named in ``writers``."""
        return user in self.writers

    def flagged_for_review(self, ref: TicketRef) -> bool:
        """Only the tickets named in ``flagged``."""
        return ref.key in self.flagged


__all__ = ["DryRunEffects", "Effects", "LiveEffects", "NotConfigured", "TicketRef", "log_effect"]

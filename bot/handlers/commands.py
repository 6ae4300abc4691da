"""Comments: `/lesson` and `/playbook` commands, and bullet ids cited in PR discussions."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from sqlalchemy import select

from bot.effects import TicketRef
from bot.handlers.context import effect, require
from bot.handlers.pull_requests import cite, scope_of
from bot.handlers.router import Event, router
from playbook import db, lifecycle, tracking
from playbook.capture import Command, commands_in
from playbook.errors import PlaybookError
from playbook.models import SideEffect

if TYPE_CHECKING:
    from bot.worker import Services

log = logging.getLogger(__name__)


def _already_replied(services: Services, event: Event) -> bool:
    # A redelivered or replayed comment must not make the bot answer twice.
    with db.transaction(services.engine) as session:
        return (
            session.scalars(
                select(SideEffect.id).where(
                    SideEffect.delivery_id == event.delivery_id,
                    SideEffect.action == "reply",
                    SideEffect.status.in_(("done", "dry_run")),
                )
            ).first()
            is not None
        )


def run_commands(
    services: Services,
    event: Event,
    ref: TicketRef,
    author: str,
    body: str | None,
    learned_from: str,
    scope: str,
    source_url: str | None,
) -> None:
    """Carry out the commands in a comment, if its author may change the playbook."""
    commands = commands_in(body)
    if not commands:
        return
    mention = f"@{author}" if ref.target == "github" else author
    allowed_ok, allowed = effect(
        services, ref, "check_permission", lambda: services.out.can_change_playbook(ref, author)
    )
    if not allowed_ok:
        return  # cannot check who may change the playbook, so nothing changes
    if not allowed:
        where = (
            "write access to this repository"
            if ref.target == "github"
            else ("a place in PLAYBOOK_JIRA_ALLOWED_USERS")
        )
        reply = (
            f"Thanks {mention}! Only people with {where} can change the playbook, so nothing "
            "was changed. A maintainer can repeat the command."
        )
    else:
        reply = "\n".join(
            _apply(services, command, author, learned_from, scope, source_url)
            for command in commands
        )
    if _already_replied(services, event):
        return
    effect(services, ref, "reply", lambda: services.out.reply(ref, reply))


def _apply(
    services: Services,
    command: Command,
    author: str,
    learned_from: str,
    scope: str,
    source_url: str | None,
) -> str:
    if command.problem:
        return f"Could not read that command: {command.problem}."
    actor = f"{author} (comment)"
    try:
        with db.transaction(services.engine) as session:
            if command.verb == "lesson":
                result = lifecycle.add(
                    session,
                    command.text,
                    learned_from=learned_from,
                    actor=actor,
                    scope=scope,
                    source="comment",
                    source_url=source_url,
                )
                if not result.created:
                    return f"{result.bullet.id} already says this; nothing added."
                return f"Captured {result.bullet.id}, learned from {learned_from}."
            bullet_id = command.bullet_id or ""
            if command.verb == "approve":
                change = lifecycle.approve(session, bullet_id, actor=actor, reason=command.reason)
            elif command.verb == "deprecate":
                change = lifecycle.deprecate(
                    session,
                    bullet_id,
                    reason=command.reason or f"deprecated by {author}",
                    actor=actor,
                )
            else:
                change = lifecycle.restore(session, bullet_id, actor=actor, reason=command.reason)
            if not change.changed:
                return f"{bullet_id} is already {change.bullet.status}; nothing changed."
            return f"{bullet_id} is now {change.bullet.status}."
    except PlaybookError as problem:
        return f"Nothing changed: {problem}."


def _comment_url(comment: dict[str, Any]) -> str | None:
    return comment.get("html_url") if isinstance(comment.get("html_url"), str) else None


@router.register("github", "issue_comment", "created")
def github_comment(event: Event, services: Services) -> None:
    """Commands in an issue or PR comment; on a PR, bullet ids are cites."""
    issue = require(event.payload, "issue")
    comment = require(event.payload, "comment")
    repo = require(event.payload, "repository", "full_name")
    number = int(require(issue, "number"))
    ref = TicketRef.github(repo, number, event.installation_id)
    author = str((comment.get("user") or {}).get("login") or "")
    if (comment.get("user") or {}).get("type") == "Bot":
        return  # our own replies (and other bots) are not commands
    learned_from, scope = ref.key, repo
    if issue.get("pull_request"):
        with db.transaction(services.engine) as session:
            tickets = tracking.tickets_of(session, ref.key)
            cite(session, ref.key, tickets[0] if tickets else None, comment.get("body"), "comment")
        if tickets:
            learned_from, scope = tickets[0], scope_of(tickets[0], repo)
    run_commands(
        services,
        event,
        ref,
        author,
        comment.get("body"),
        learned_from,
        scope,
        _comment_url(comment),
    )


@router.register("github", "pull_request_review", "submitted")
@router.register("github", "pull_request_review_comment", "created")
def github_review(event: Event, services: Services) -> None:
    """Bullet ids in review bodies and review comments are cites."""
    pr = require(event.payload, "pull_request")
    repo = require(event.payload, "repository", "full_name")
    key = f"{repo}#{int(require(pr, 'number'))}"
    body = (event.payload.get("review") or event.payload.get("comment") or {}).get("body")
    with db.transaction(services.engine) as session:
        tickets = tracking.tickets_of(session, key)
        cite(session, key, tickets[0] if tickets else None, body, "review")


@router.register("jira", "comment_created")
def jira_comment(event: Event, services: Services) -> None:
    """Commands in a Jira comment."""
    issue = require(event.payload, "issue")
    comment = require(event.payload, "comment")
    key = str(require(issue, "key"))
    author = comment.get("author") or {}
    user = str(author.get("accountId") or author.get("name") or author.get("emailAddress") or "")
    project = ((issue.get("fields") or {}).get("project") or {}).get("key") or key.rsplit("-", 1)[0]
    run_commands(
        services,
        event,
        TicketRef.jira(key),
        user,
        comment.get("body"),
        key,
        project,
        comment.get("self"),
    )

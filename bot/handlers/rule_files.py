"""The AGENTS.md sync PR's fate: closed unmerged by a writer pauses the sync; merged records it."""

from __future__ import annotations

import logging
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from bot import agents_md, payloads, repo_settings
from bot.effects import TicketRef
from bot.handlers.context import Ignored, effect, publish
from bot.handlers.router import Event, Router
from playbook import clock, db
from playbook.repos import syncs
from playbook.repos.settings import FILE_PATH

if TYPE_CHECKING:
    from bot.services import Services

log = logging.getLogger(__name__)
router = Router()

# The purpose of the one comment that tells a sync PR's closer the sync is paused (or not).
PAUSED = "agents-md-paused"
NOT_PAUSED = "agents-md-not-paused"


@router.register("github", "pull_request", "closed")
@router.register("github", "pull_request", "reopened")
def sync_pull_closed(event: Event, services: Services) -> None:
    """A sync PR closed by a person with write access pauses its repository's sync (and says
    so; anyone else's close pauses nothing, and says that); merged, or reopened by a person
    with write access, the sync goes on."""
    data = payloads.PullRequestEvent.model_validate(event.payload)
    pr = data.pull_request
    repo = data.repository.full_name
    author = pr.user
    if not agents_md.is_sync_pull(
        services,
        event.installation_id,
        pr.head.ref if pr.head else None,
        author.login if author else None,
        author.type if author else None,
    ):
        raise Ignored("not the AGENTS.md sync PR")
    ref = TicketRef.github(repo, pr.number, event.installation_id)
    sender = data.sender
    if event.action == "reopened":
        # The pause is a maintainer's decision both ways: a reopen lifts it only as a close sets it.
        if sender is None or not _may_pause(services, ref, sender.login):
            raise Ignored("reopened by someone without write access: a pause stands")
        with db.transaction(services.engine) as session:
            lifted = syncs.reopened(session, repo, pr.number)
        log.info("%s#%s reopened: %s", repo, pr.number, "sync resumed" if lifted else "no pause")
        return
    own = repo_settings.effective(services, repo, event.installation_id)
    conf = own.settings.agents_md
    if pr.merged:
        with db.transaction(services.engine) as session:
            syncs.merged(session, repo, conf.path, pr.number, pr.html_url)
        log.info("%s#%s merged: the lessons block is in %s", repo, pr.number, conf.path)
        return
    if sender is None or agents_md.is_bot_account(
        services, event.installation_id, sender.login, sender.type
    ):
        raise Ignored("the sync PR was closed by the bot, not by a person")
    if not _may_pause(services, ref, sender.login):
        # Closing takes only triage: such a close pauses nothing, and the next sync opens a
        # new PR. Said once on the closed PR, so the closer knows why it comes back.
        log.info("%s#%s closed by @%s, who may not pause the sync", repo, pr.number, sender.login)
        publish(services, ref, NOT_PAUSED, not_paused_comment(conf.path, sender.login))
        return
    reason = f"closed unmerged by @{sender.login}"
    with db.transaction(services.engine) as session:
        state = syncs.get(session, repo)
        kept = syncs.paused(session, repo)
        if kept is not None and state is not None and state.pull_number == pr.number:
            until = kept.until  # a redelivery: the pause it set stands as it was
        else:
            until = clock.now() + timedelta(days=conf.pause_days)
            syncs.pause(
                session,
                repo,
                conf.path,
                until,
                reason,
                pull_number=pr.number,
                pull_url=pr.html_url,
            )
    log.info("%s: AGENTS.md sync paused until %s (%s)", repo, f"{until:%Y-%m-%d}", reason)
    publish(services, ref, PAUSED, paused_comment(repo, conf.path, until, sender.login))


def _may_pause(services: Services, ref: TicketRef, login: str) -> bool:
    """`agents_md.may_pause` through effect(): its call is logged, and needs the client."""
    checked, allowed = effect(
        services, ref, "check_permission", lambda: agents_md.may_pause(services, ref, login)
    )
    if not checked:
        raise Ignored("who changed the sync PR cannot be checked: the client is not configured")
    return bool(allowed)


def not_paused_comment(path: str, login: str) -> str:
    """What the bot says on a sync PR closed by someone without write access: nothing paused."""
    return (
        f"@{login} closed this pull request, but only people with write access to this "
        f"repository can pause the update of the lessons block in `{path}`, so the sync goes "
        "on: its next run opens a new pull request.\n\n"
        "Someone with write access can close that one to pause the sync, or set "
        f"`agents_md: {{enabled: false}}` in `{FILE_PATH}` to stop it."
    )


def paused_comment(repo: str, path: str, until: datetime, login: str) -> str:
    """What the bot says on a sync PR a person closed: paused until when, and how to resume."""
    day = f"{until:%Y-%m-%d}"
    return (
        f"@{login} closed this pull request without merging it, so playbook-bot will not "
        f"update the lessons block in `{path}` until {day}.\n\n"
        "To resume sooner, reopen or merge this pull request, or run "
        f"`playbook-bot agents-md sync --repo {repo} --resume`. "
        f"To stop the sync for good, set `agents_md: {{enabled: false}}` in `{FILE_PATH}`."
    )

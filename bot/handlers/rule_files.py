"""The AGENTS.md sync PR's fate: closed unmerged by a person pauses the sync; merged records it."""

from __future__ import annotations

import logging
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from bot import agents_md, payloads, repo_settings
from bot.effects import TicketRef
from bot.handlers.context import Ignored, publish
from bot.handlers.router import Event, Router
from playbook import clock, db
from playbook.repos import syncs
from playbook.repos.settings import FILE_PATH

if TYPE_CHECKING:
    from bot.services import Services

log = logging.getLogger(__name__)
router = Router()

# The purpose of the one comment that tells a sync PR's closer the sync is paused.
PAUSED = "agents-md-paused"


@router.register("github", "pull_request", "closed")
@router.register("github", "pull_request", "reopened")
def sync_pull_closed(event: Event, services: Services) -> None:
    """A sync PR closed by a person pauses its repository's sync (and says so); merged or
    reopened, the sync goes on."""
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
    if event.action == "reopened":
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
    sender = data.sender
    if sender is None or agents_md.is_bot_account(
        services, event.installation_id, sender.login, sender.type
    ):
        raise Ignored("the sync PR was closed by the bot, not by a person")
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
    ref = TicketRef.github(repo, pr.number, event.installation_id)
    publish(services, ref, PAUSED, paused_comment(repo, conf.path, until, sender.login))


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

"""A push that changes `.github/playbook-bot.yml` on the default branch: read it again now."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from bot import payloads, repo_settings
from bot.handlers.context import Ignored
from bot.handlers.router import Event, Router
from playbook.repos.settings import FILE_PATH, ORG_REPO

if TYPE_CHECKING:
    from bot.services import Services

log = logging.getLogger(__name__)
router = Router()

# GitHub lists at most this many commits in a push; past it, a file may have changed unseen.
LISTED_COMMITS = 2_048


@router.register("github", "push")
def push(event: Event, services: Services) -> None:
    """Mark the pushed repository's settings (all its owner's, for the `.github` repository)
    stale and read them again, so a change applies to the next delivery, not in 10 minutes."""
    data = payloads.PushEvent.model_validate(event.payload)
    repo = data.repository.full_name
    if data.ref != f"refs/heads/{data.repository.default_branch}":
        raise Ignored(f"a push to {data.ref}, not to the default branch")
    commits = [*data.commits, *([data.head_commit] if data.head_commit else [])]
    touched = any(commit.touches(FILE_PATH) for commit in commits)
    if not touched and len(data.commits) < LISTED_COMMITS:
        raise Ignored(f"the push did not change {FILE_PATH}")
    owner, name = repo.split("/", 1)
    if name == ORG_REPO:
        # The organisation's defaults changed: every repository of the owner reads again.
        count = repo_settings.mark_stale(services.engine, owner=owner)
        log.info(
            "%s changed: settings of %d repositories of %s read again", FILE_PATH, count, owner
        )
        return
    repo_settings.mark_stale(services.engine, repo)
    found = repo_settings.effective(services, repo, event.installation_id, refresh=True)
    if found.problems:
        log.warning(
            "%s of %s has %d problem(s); the last good settings apply: %s",
            FILE_PATH,
            repo,
            len(found.problems),
            "; ".join(str(p) for p in found.problems),
        )
    else:
        log.info("%s of %s read again", FILE_PATH, repo)

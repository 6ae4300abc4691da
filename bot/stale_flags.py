"""A merged PR's changed files flag the lessons anchored to them (`playbook.anchors.stale`)."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from bot import repo_settings
from bot.effects import TicketRef
from bot.handlers.context import effect
from playbook import db
from playbook.anchors import stale
from playbook.outcomes.tracking import PullRequestState

if TYPE_CHECKING:
    from bot.services import Services

log = logging.getLogger(__name__)
ACTOR = "bot"


def flag_merged(services: Services, seen: PullRequestState) -> list[stale.Flagged]:
    """Flag the lessons of the repository's scope anchored to what the merged PR changed.

    Only the repository's own scope: anchors are repository-relative, so a global lesson's
    ``orders/`` could be any repository's. Each merge delivery reads the files once (one
    API call a page); a redelivery flags nothing twice.
    """
    scope = repo_settings.effective(services, seen.repo, seen.installation_id).scope
    with db.transaction(services.engine) as session:
        if not stale.anchored_in(session, scope):
            return []  # no lesson of the scope is anchored: no API call to make
    ref = TicketRef.github(seen.repo, seen.number, seen.installation_id)
    done, changes = effect(services, ref, "read_files", lambda: services.out.pull_files(ref))
    if not done or not changes:
        return []
    with db.transaction(services.engine) as session:
        flagged = stale.flag(session, scope, seen.key, changes, actor=ACTOR)
    for one in flagged:
        log.info("%s flagged possibly stale: %s", one.bullet_id, one.detail)
    return flagged

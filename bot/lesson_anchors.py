"""The anchors of a lesson captured from a pull request (its Lessons section, a `/lesson`).

The PR's changed files are read once (`Effects.pull_files`) and turned into a few globs by
`playbook.anchors.capture`. The read never costs the lesson: when GitHub fails or is not
configured, the lesson is captured without anchors and the log says why.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import requests
from github.GithubException import GithubException

from bot import claims
from bot.effects import TicketRef, log_effect
from bot.github import NotConfigured
from playbook.anchors.capture import from_changes

if TYPE_CHECKING:
    from bot.services import Services

log = logging.getLogger(__name__)
ACTION = "read_files_for_anchors"


def of_pull(services: Services, ref: TicketRef) -> list[str] | None:
    """The globs a lesson learned on PR ``ref`` is anchored to; None when none (or unread).

    The delivery's lease is checked first, as before any side effect: a worker that lost the
    delivery raises LeaseLost here rather than capture anything.
    """
    claims.check()
    try:
        changes = services.out.pull_files(ref)
    except NotConfigured as missing:
        log.warning("%s on %s skipped: %s; no anchors", ACTION, ref.key, missing)
        log_effect(services.engine, ref, ACTION, "skipped", str(missing))
        return None
    except (GithubException, requests.RequestException) as error:
        why = f"HTTP {error.status}" if isinstance(error, GithubException) else type(error).__name__
        log.warning("%s on %s failed (%s): lessons captured without anchors", ACTION, ref.key, why)
        log_effect(services.engine, ref, ACTION, "failed", why)
        return None
    log_effect(services.engine, ref, ACTION, "dry_run" if services.out.dry_run else "done")
    paths = from_changes(changes)
    log.info(
        "%s: %d changed files anchor its lessons to %s",
        ref.key,
        len(changes),
        ", ".join(paths) if paths else "nothing (too many places, or none)",
    )
    return paths

"""The anchors of a lesson captured from a pull request (its Lessons section, a `/lesson`).

The PR's changed files are read once (`Effects.pull_files`) and turned into a few globs by
`playbook.anchors.capture`. The read never costs the lesson: when GitHub fails or is not
configured, the lesson is captured without anchors and the log says why.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from bot.effects import TicketRef, read_softly
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
    changes = read_softly(
        services.engine,
        services.out.dry_run,
        ref,
        ACTION,
        lambda: services.out.pull_files(ref),
        "lessons captured without anchors",
        log,
    )
    if changes is None:
        return None
    paths = from_changes(changes)
    log.info(
        "%s: %d changed files anchor its lessons to %s",
        ref.key,
        len(changes),
        ", ".join(paths) if paths else "nothing (too many places, or none)",
    )
    return paths

"""A closed GitHub issue: read the 👍/👎 on its lessons comment as fit verdicts.

A closed PR's tickets are read where its closing is handled (`pull_requests`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from bot import payloads, reactions
from bot.handlers.context import Ignored
from bot.handlers.router import Event, Router

if TYPE_CHECKING:
    from bot.services import Services

router = Router()


@router.register("github", "issues", "closed")
def issue_closed(event: Event, services: Services) -> None:
    """The ticket is done: what people said of its lessons is read now, not only by the sweep."""
    data = payloads.IssuesEvent.model_validate(event.payload)
    key = f"{data.repository.full_name}#{data.issue.number}"
    if not reactions.read_closed(services, [key], event.installation_id):
        raise Ignored(f"{key} has no lessons comment whose reactions could be read")

"""The bot's reply on a PR whose Lessons section holds a credential: what was left out, not why."""

from __future__ import annotations

from typing import TYPE_CHECKING

from bot.effects import TicketRef
from bot.handlers.context import publish
from playbook import db
from playbook.deliveries import comments
from playbook.outcomes.evidence import Skipped
from playbook.outcomes.tracking import PullRequestState

if TYPE_CHECKING:
    from bot.services import Services

# One reply per PR, edited in place as its description changes, never one per edit.
PURPOSE = "lessons-not-captured"
_ALL_CLEAR = (
    "The Lessons section no longer holds a credential; its lessons were captured. "
    "If a credential was real, rotate it: the PR's edit history still shows it."
)


def reply_text(skipped: tuple[Skipped, ...] | list[Skipped]) -> str:
    """What the reply says: each item left out, what it holds and where, never the value."""
    if len(skipped) == 1:
        head = "1 lesson in the Lessons section was not captured: "
        return (
            f"{head}item {skipped[0].item} holds {skipped[0].holds}. Edit the PR description "
            "to remove it, and rotate the credential if it was real; the lesson is captured "
            "once it is gone."
        )
    lines = [f"{len(skipped)} lessons in the Lessons section were not captured:"]
    lines += [f"- item {entry.item} holds {entry.holds}" for entry in skipped]
    lines.append(
        "Edit the PR description to remove them, and rotate any credential that was real; "
        "the lessons are captured once they are gone."
    )
    return "\n".join(lines)


def reply_on_pull(services: Services, seen: PullRequestState, skipped: tuple[Skipped, ...]) -> None:
    """Say on the PR which Lessons-section items were left out; once fixed, say so instead.

    Posted through the reserved comment slot, so a redelivery or a retry posts nothing new
    and an edit of the description edits the one reply.
    """
    ref = TicketRef.github(seen.repo, seen.number, seen.installation_id)
    if skipped:
        publish(services, ref, PURPOSE, reply_text(skipped))
        return
    with db.transaction(services.engine) as session:
        earlier = comments.find(session, ref.target, ref.key, PURPOSE)
    if earlier is not None and earlier.external_id is not None:
        publish(services, ref, PURPOSE, _ALL_CLEAR)

"""The model's worker runs this: write a consolidation proposal's merged draft, in one call.

Queued by `bot.consolidate` with each new proposal when a model is set. The answer only ever
becomes the proposal's draft (its members' dropped key terms flagged for the reviewer); an
answer that does not replace exactly the group, or could not be stored as a lesson, is refused
and the draft stays the longest member. How a failed call ends the job is `model_jobs.ask`'s.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from bot import model_jobs
from bot.handlers.context import Ignored, PermanentError
from bot.handlers.router import Event, Router
from playbook import db
from playbook.consolidation import prompt, store
from playbook.errors import ConsolidationNotFound, PlaybookError
from playbook.models import Bullet, Consolidation

if TYPE_CHECKING:
    from bot.services import Services

log = logging.getLogger(__name__)

router = Router()

# The drafts a model may replace: the longest member it started with, or an earlier model's.
REPLACEABLE = ("longest", "model")


def _open(session: Any, consolidation_id: int) -> Consolidation:
    """The proposal, if it is still open with a draft nobody edited; else the job is ignored."""
    try:
        found = store.get(session, consolidation_id)
    except ConsolidationNotFound:
        raise Ignored(f"consolidation {consolidation_id} is gone") from None
    if found.status != "open":
        raise Ignored(f"consolidation {consolidation_id} is {found.status}: no draft to write")
    if found.draft_source not in REPLACEABLE:
        raise Ignored(
            f"consolidation {consolidation_id}'s draft was {found.draft_source} by a person: "
            "the model's would replace their text"
        )
    return found


@router.register(model_jobs.SOURCE, model_jobs.MERGE)
def merge_a_group(event: Event, services: Services) -> None:
    """Ask the model for one lesson replacing the group's members; store it as the draft."""
    consolidation_id = event.payload.get("consolidation")
    if not isinstance(consolidation_id, int) or isinstance(consolidation_id, bool):
        raise PermanentError("the merge job names no consolidation")
    with db.transaction(services.engine) as session:
        proposal = _open(session, consolidation_id)
        members: list[tuple[str, str]] = []
        for member_id in proposal.member_ids:
            bullet = session.get(Bullet, member_id)
            if bullet is None:
                raise Ignored(f"consolidation {consolidation_id}'s member {member_id} is gone")
            members.append((bullet.id, bullet.text))
    if not services.settings.model_enabled:
        # Queued while a model was set, run after it was unset: the longest member stays.
        raise Ignored("no model endpoint is set (PLAYBOOK_MODEL_BASE_URL and PLAYBOOK_MODEL)")
    answer = model_jobs.ask(
        services,
        "merge",
        prompt.messages(members),
        prompt.MergeAnswer,
        max_tokens=prompt.MAX_ANSWER_TOKENS,
    )
    ids = [member_id for member_id, _ in members]
    checked = prompt.checked(answer.value, ids, max_chars=services.settings.max_lesson_chars)
    if checked.text is None:
        # The model's answer cannot stand for the group: a second call would cost as much and
        # most likely say the same, so the job ends here, its reason kept on the inbox row.
        log.warning(
            "consolidation %d: the model's merge was refused (%s); the draft stays the longest "
            "member",
            consolidation_id,
            checked.refused,
        )
        raise Ignored(
            f"the model's merge of consolidation {consolidation_id} was refused: "
            f"{checked.refused}; the draft stays the longest member"
        )
    with db.transaction(services.engine) as session:
        # Checked again: a person may have decided or edited it while the model thought.
        _open(session, consolidation_id)
        try:
            updated = store.set_draft(
                session,
                consolidation_id,
                checked.text,
                source="model",
                model=answer.model,
                max_chars=services.settings.max_lesson_chars,
            )
        except PlaybookError as error:
            # The lesson checks the draft must pass, seen from the store's side.
            raise Ignored(
                f"the model's merge of consolidation {consolidation_id} was refused: {error}; "
                "the draft stays the longest member"
            ) from None
        dropped = dict(updated.dropped_terms or {})
    log.info(
        "consolidation %d: merged draft by %s (%d characters)%s",
        consolidation_id,
        answer.model,
        len(checked.text),
        "; dropped key terms flagged: "
        + "; ".join(f"{member} {', '.join(terms)}" for member, terms in sorted(dropped.items()))
        if dropped
        else "",
    )

"""POST /api/v1/lessons/{id}/anchors: a maintainer sets or clears the code a lesson is about."""

from __future__ import annotations

from flask import Response, g
from pydantic import BaseModel, ConfigDict

from playbook import agents, db
from playbook.errors import PlaybookError
from playbook.lessons import fields, lifecycle
from webhooks import api as v1
from webhooks import api_parts, api_types, problems
from webhooks.runtime import runtime

api = api_parts.sibling("api_anchors", __name__, v1.api)
# An agent token's 403, a lesson not there (404) or a bad value: as every lesson route.
api.errorhandler(PlaybookError)(v1._domain_problem)


class AnchorsBody(BaseModel):
    """The lesson's new anchors: a field left out stays as it is, an empty list clears it."""

    model_config = ConfigDict(extra="forbid")

    paths: api_types.AnchorPaths | None = None
    symbols: api_types.AnchorSymbols | None = None
    reason: v1.Reason | None = None


@api.post(
    "/lessons/<id>/anchors",
    tags=[v1.maintain_tag],
    summary="Set a lesson's anchors to code",
    responses={200: agents.Change, 403: problems.RESPONSE, 404: problems.RESPONSE},
)
def set_anchors(path: v1.LessonPath, body: AnchorsBody) -> Response:
    """Set the repository globs (``paths``) and names (``symbols``) the lesson is about
    (maintainer token); recorded in its history as an edit, undone by reverting it."""
    caller: agents.Caller = g.caller
    caller.require_maintainer("edit")
    with db.transaction(runtime().engine) as session:
        bullet = agents.visible(session, caller, v1._lesson_id(path.id))
        reason = fields.text(body.reason or "", "reason", fields.REASON_CHARS) or None
        change = lifecycle.edit(
            session,
            bullet.id,
            actor=caller.actor,
            reason=reason,
            # An empty list arrives as [] and clears; left out (None) leaves the field.
            paths=body.paths,
            symbols=body.symbols,
        )
        answer = agents.Change(changed=change.changed, lesson=agents.lesson(change.bullet))
    return Response(answer.model_dump_json(), mimetype="application/json")

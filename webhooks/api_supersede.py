"""POST /api/v1/lessons/{id}/supersede: a maintainer replaces a lesson by a newer one."""

from __future__ import annotations

from typing import Annotated

from flask import Response, g
from pydantic import BaseModel, ConfigDict, Field

from playbook import agents, db
from playbook.errors import BulletNotFound, PlaybookError
from playbook.lessons import fields, replacements
from webhooks import api as v1
from webhooks import api_parts, problems
from webhooks.runtime import runtime

api = api_parts.sibling("api_supersede", __name__, v1.api)


@api.errorhandler(PlaybookError)
def _domain_problem(error: PlaybookError) -> Response:
    # As every lesson route answers, but a replacement that is not there is no 404: the
    # lesson in the path exists, and the request conflicts with what the playbook holds.
    if isinstance(error, BulletNotFound) and error.field == "by":
        return problems.problem(409, str(error), field="by")
    if isinstance(error, replacements.OtherScope):
        return problems.problem(409, str(error), field=error.field)
    return v1._domain_problem(error)


class SupersedeBody(BaseModel):
    """The lesson that replaces this one, and why (kept in both lessons' history)."""

    model_config = ConfigDict(extra="forbid")

    by: Annotated[
        str,
        Field(
            min_length=1,
            max_length=fields.BULLET_ID_CHARS,
            pattern=v1.LESSON_ID,
            description="The replacing lesson's id, e.g. pb-9: active or proposed.",
            examples=["pb-9"],
        ),
    ]
    reason: v1.Reason | None = None


@api.post(
    "/lessons/<id>/supersede",
    tags=[v1.maintain_tag],
    summary="Supersede a lesson by a newer one",
    responses={
        200: agents.Change,
        403: problems.RESPONSE,
        404: problems.RESPONSE,
        409: problems.RESPONSE,
    },
)
def supersede(path: v1.LessonPath, body: SupersedeBody) -> Response:
    """Mark the lesson superseded by ``by`` (maintainer token): it is no longer shown, kept.

    Its detail names the replacement (``superseded_by``) and the replacement's lists it
    (``supersedes``); POST .../restore undoes it. 409 when ``by`` names no lesson, is the
    lesson itself, is not active or proposed, would close a cycle, or when the lesson is
    superseded by another already.
    """
    caller: agents.Caller = g.caller
    with db.transaction(runtime().engine) as session:
        change = agents.supersede(session, caller, v1._lesson_id(path.id), body.by, body.reason)
    return Response(change.model_dump_json(), mimetype="application/json")

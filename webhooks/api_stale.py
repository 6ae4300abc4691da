"""GET /api/v1/stale and POST /api/v1/lessons/{id}/clear-stale: lessons a merged PR flagged."""

from __future__ import annotations

from datetime import datetime

from flask import Response, g
from pydantic import BaseModel, Field

from playbook import agents, db
from playbook.anchors import stale as flags
from playbook.errors import PlaybookError
from webhooks import api as v1
from webhooks import api_parts, problems
from webhooks.runtime import runtime

api = api_parts.sibling("api_stale", __name__, v1.api)


@api.errorhandler(PlaybookError)
def _domain_problem(error: PlaybookError) -> Response:
    # As every lesson route answers: a lesson not found (or not the token's) is a 404, an
    # agent token's clear a 403, a bad reason a 400 naming it.
    return v1._domain_problem(error)


# The list answers this many flagged lessons at most, oldest flag first.
MAX_LISTED = 500


class StaleLesson(BaseModel):
    """A lesson flagged possibly stale: what a merged PR did to the code it is anchored to."""

    id: str
    text: str
    scope: str
    status: str
    paths: list[str] = Field(description="Its anchors now (a renamed file's followed).")
    stale_since: datetime
    stale_detail: str | None = Field(description='e.g. "acme/api#12 deleted orders/locking.py".')
    stale_pr: str | None = Field(description="The merged PR that flagged it, e.g. acme/api#12.")
    files_gone: bool = Field(
        description="Every file it is about was removed: left out of AGENTS.md until cleared."
    )


class StaleList(BaseModel):
    """The flagged lessons the token sees, oldest flag first."""

    lessons: list[StaleLesson]


class Cleared(BaseModel):
    """Whether the flag was cleared (false: the lesson was not flagged), and the lesson."""

    changed: bool
    lesson: agents.Lesson


@api.get(
    "/stale",
    tags=[v1.lessons_tag],
    summary="Lessons flagged possibly stale",
    responses={200: StaleList},
)
def stale() -> Response:
    """Lessons whose anchored code a merged PR changed, renamed or deleted: each waits for a
    maintainer to confirm it (edit, supersede, deprecate) or clear the flag.

    An agent token bound to a scope sees its scope's flagged lessons (and global ones).
    """
    caller: agents.Caller = g.caller
    with db.transaction(runtime().engine) as session:
        rows = flags.flagged(session, caller.view, limit=MAX_LISTED)
    answer = StaleList(lessons=[StaleLesson.model_validate(row) for row in rows])
    return Response(answer.model_dump_json(), mimetype="application/json")


@api.post(
    "/lessons/<id>/clear-stale",
    tags=[v1.maintain_tag],
    summary="Clear a lesson's stale flag",
    responses={200: Cleared, 403: problems.RESPONSE, 404: problems.RESPONSE},
)
def clear_stale(path: v1.LessonPath, body: v1.ReasonBody) -> Response:
    """The lesson still holds after the PR that flagged it (maintainer token): its flag is
    cleared, with the reason in its history. ``changed`` is false when it was not flagged."""
    caller: agents.Caller = g.caller
    caller.require_maintainer("clear the stale flag of")
    with db.transaction(runtime().engine) as session:
        bullet = agents.visible(session, caller, v1._lesson_id(path.id))
        changed = flags.clear(session, bullet.id, actor=caller.actor, reason=body.reason)
        answer = Cleared(changed=changed, lesson=agents.lesson(bullet))
    return Response(answer.model_dump_json(), mimetype="application/json")

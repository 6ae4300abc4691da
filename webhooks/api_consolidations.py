"""/api/v1/consolidations: proposals to merge overlapping lessons, listed and decided."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from flask import Response, g
from pydantic import BaseModel, ConfigDict, Field

from playbook import agents, db
from playbook.consolidation import store
from playbook.errors import (
    BulletNotFound,
    ConsolidationNotFound,
    InvalidTransition,
    PlaybookError,
)
from playbook.lessons import fields
from webhooks import api as v1
from webhooks import api_parts, problems
from webhooks.runtime import runtime

api = api_parts.sibling("api_consolidations", __name__, v1.api)

# Ids are BIGINT in both databases: a larger number cannot name a row, and PostgreSQL would
# refuse to compare with it instead of finding nothing.
MAX_ID = 2**63 - 1
MAX_LIMIT = 500
Status = Literal["open", "accepted", "rejected", "undone", "stale"]


@api.errorhandler(PlaybookError)
def _domain_problem(error: PlaybookError) -> Response:
    if isinstance(error, ConsolidationNotFound):
        return problems.problem(404, str(error), field="id")
    if isinstance(error, BulletNotFound):
        # The consolidation in the path exists; a member it names is gone from the playbook.
        return problems.problem(409, str(error))
    if isinstance(error, InvalidTransition):
        return problems.problem(409, str(error))
    return v1._domain_problem(error)


# -- requests ---------------------------------------------------------------------------


class ConsolidationPath(BaseModel):
    """A consolidation id in the path."""

    id: int = Field(ge=1, le=MAX_ID, description="The consolidation's id, e.g. 3.")


class ConsolidationQuery(BaseModel):
    """Filters of the consolidations list."""

    status: Status | None = Field(None, description="Only those in this status.")
    scope: Annotated[str, Field(max_length=v1.FILTER_CHARS, pattern=v1.NO_NUL)] | None = Field(
        None, description="Only those of this scope, e.g. acme/api or global."
    )
    limit: int = Field(100, ge=1, le=MAX_LIMIT)


class AcceptBody(BaseModel):
    """The merged lesson's text (the draft when left out), and why."""

    model_config = ConfigDict(extra="forbid")

    text: (
        Annotated[str, Field(min_length=1, max_length=fields.MAX_LESSON_CHARS, pattern=v1.NONBLANK)]
        | None
    ) = Field(None, description="The merged lesson's text, edited; the draft when left out.")
    reason: v1.Reason | None = None


class DecisionBody(BaseModel):
    """Why: kept with the consolidation and in the lessons' history."""

    model_config = ConfigDict(extra="forbid")

    reason: v1.Reason | None = None


# -- answers ----------------------------------------------------------------------------


class Member(BaseModel):
    """A lesson the consolidation merges."""

    id: str
    text: str | None = Field(description="The lesson's text; null once it is gone.")
    learned_from: str | None = None
    status: str | None = Field(None, description="The lesson's status now.")


class Consolidation(BaseModel):
    """A group of overlapping lessons of one scope and the one lesson that would replace them."""

    id: int
    scope: str
    status: Status = Field(
        description="open (waits for a maintainer), accepted, rejected, undone, or stale "
        "(a member changed since it was proposed)."
    )
    member_ids: list[str]
    members: list[Member] = Field(default_factory=list)
    draft: str = Field(description="The merged text proposed.")
    draft_source: str = Field(
        description="longest (the longest member, to edit), model (written by `model`), "
        "or edited (by a maintainer)."
    )
    model: str | None = None
    saves_chars: int = Field(description="Characters the playbook shrinks by once accepted.")
    similarity: float
    dropped_terms: dict[str, list[str]] = Field(
        default_factory=dict, description="Each member's key terms the draft lacks."
    )
    merged_id: str | None = Field(None, description="The merged lesson, once accepted.")
    created_at: datetime
    decided_at: datetime | None = None
    decided_by: str | None = None
    reason: str | None = None


class ConsolidationList(BaseModel):
    """Consolidations, newest first."""

    count: int
    consolidations: list[Consolidation]


_DECISION = {
    200: Consolidation,
    403: problems.RESPONSE,
    404: problems.RESPONSE,
    409: problems.RESPONSE,
}


# -- routes -----------------------------------------------------------------------------


def _maintainer(action: str) -> agents.Caller:
    caller: agents.Caller = g.caller
    # As with proposals: an agent may propose lessons, never review the playbook's shape.
    if caller.role != "maintainer":
        raise agents.Forbidden(
            f"only a maintainer may {action} consolidations; use the maintainer token "
            "(PLAYBOOK_API_TOKEN)"
        )
    return caller


def _answer(row: Any) -> Consolidation:
    return Consolidation.model_validate(store.as_dict(row))


def _json(model: BaseModel) -> Response:
    return Response(model.model_dump_json(), mimetype="application/json")


@api.get(
    "/consolidations",
    tags=[v1.maintain_tag],
    summary="Consolidation proposals",
    responses={200: ConsolidationList, 403: problems.RESPONSE},
)
def list_consolidations(query: ConsolidationQuery) -> Response:
    """Proposals to merge overlapping lessons (maintainer token), filtered by status and scope.

    The same proposals as /ui/proposals and `playbook-bot consolidations`.
    """
    _maintainer("list")
    with db.transaction(runtime().engine) as session:
        rows = store.listing(session, status=query.status, scope=query.scope, limit=query.limit)
        found = [_answer(row) for row in rows]
    return _json(ConsolidationList(count=len(found), consolidations=found))


@api.get(
    "/consolidations/<id>",
    tags=[v1.maintain_tag],
    summary="Get a consolidation",
    responses={200: Consolidation, 403: problems.RESPONSE, 404: problems.RESPONSE},
)
def get_consolidation(path: ConsolidationPath) -> Response:
    """One consolidation with its members' texts and the draft (maintainer token)."""
    _maintainer("read")
    with db.transaction(runtime().engine) as session:
        return _json(_answer(store.get(session, path.id)))


@api.post(
    "/consolidations/<id>/accept",
    tags=[v1.maintain_tag],
    summary="Accept a consolidation",
    responses=_DECISION,
)
def accept(path: ConsolidationPath, body: AcceptBody) -> Response:
    """Create the merged lesson, active, from ``text`` (or the draft), and supersede every
    member by it, in one transaction (maintainer token); ``merged_id`` names it.

    The text is checked as every lesson's is (length, a credential). 409 unless the
    consolidation is open; POST .../undo takes it back.
    """
    caller = _maintainer("accept")
    reason = _reason(body.reason)
    max_chars = runtime().settings.max_lesson_chars
    with db.transaction(runtime().engine) as session:
        row = store.accept(
            session,
            path.id,
            actor=caller.actor,
            text=body.text,
            reason=reason,
            max_chars=max_chars,
        )
        return _json(_answer(row))


@api.post(
    "/consolidations/<id>/reject",
    tags=[v1.maintain_tag],
    summary="Reject a consolidation",
    responses=_DECISION,
)
def reject(path: ConsolidationPath, body: DecisionBody) -> Response:
    """Keep the lessons as they are (maintainer token); the group is not proposed again
    unless a member changes. 409 unless the consolidation is open."""
    caller = _maintainer("reject")
    with db.transaction(runtime().engine) as session:
        row = store.reject(session, path.id, actor=caller.actor, reason=_reason(body.reason))
        return _json(_answer(row))


@api.post(
    "/consolidations/<id>/undo",
    tags=[v1.maintain_tag],
    summary="Undo an accepted consolidation",
    responses=_DECISION,
)
def undo(path: ConsolidationPath, body: DecisionBody) -> Response:
    """Restore the members and archive the merged lesson (maintainer token). 409 unless the
    consolidation is accepted."""
    caller = _maintainer("undo")
    with db.transaction(runtime().engine) as session:
        row = store.undo(session, path.id, actor=caller.actor, reason=_reason(body.reason))
        return _json(_answer(row))


def _reason(reason: str | None) -> str | None:
    if reason is None:
        return None
    return fields.text(reason, "reason", fields.REASON_CHARS) or None

"""GET /api/v1/relevance: what people's verdicts taught the relevance estimate, per scope."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from flask import Response, g
from flask_openapi3 import Tag
from pydantic import BaseModel, ConfigDict, Field

from playbook import agents, db
from playbook.fit import report as fit_report
from webhooks import api as v1
from webhooks import api_parts, problems
from webhooks.runtime import runtime

relevance_tag = Tag(
    name="relevance",
    description="How people's 👍/👎 and replies recalibrated the estimate, and off-topic lessons.",
)

api = api_parts.sibling("api_relevance", __name__, v1.api)


class RelevanceQuery(BaseModel):
    """One scope, or every scope with verdicts that the token reads."""

    model_config = ConfigDict(extra="forbid")

    scope: (
        Annotated[str, Field(min_length=1, max_length=fit_report.SCOPE_CHARS, pattern=v1.NONBLANK)]
        | None
    ) = Field(None, description="A repository (owner/repo) or Jira project; default: all.")


class OffTopic(BaseModel):
    """A lesson people often mark as not fitting the tickets it was shown on."""

    bullet_id: str
    text: str = Field(description="The start of the lesson's text, on one line.")
    unhelpful: int
    helpful: int
    people: int = Field(description="How many people said it did not fit.")
    tickets: int = Field(description="On how many tickets.")
    last_reason: str | None = Field(description="The newest reason given in a reply.")
    last_at: datetime


class ScopeFit(BaseModel):
    """What one scope's verdicts taught the estimate."""

    scope: str
    labels: int = Field(description="Every verdict recorded in the scope.")
    helpful: int
    unhelpful: int
    used: int = Field(description="Verdicts on lessons the bot showed (with their estimate).")
    fitted: bool = Field(description="False: the packaged model as is, until enough verdicts.")
    shift: float | None = Field(description="Added to the estimate's log-odds; null: none.")
    at_bound: bool = Field(description="True when the verdicts would move it further.")
    fitted_at: datetime | None
    needed: int = Field(description="More verdicts on shown lessons before a fit.")
    floor: float = Field(description="The comment floor in force.")
    raw_floor: float = Field(description="The packaged estimate that reaches it in this scope.")
    words: str = Field(description="The fit as a sentence.")
    off_topic: list[OffTopic]


class OffTopicRule(BaseModel):
    """When a lesson is listed as off-topic."""

    unhelpful: int
    people: int
    tickets: int
    share: float


class RelevanceReport(BaseModel):
    """Each scope's recalibration, by name, and the off-topic lessons across them."""

    floor: float
    min_labels: int
    max_shift: float
    off_topic_rule: OffTopicRule
    scopes: list[ScopeFit]
    off_topic: list[OffTopic]


@api.get(
    "/relevance",
    tags=[relevance_tag],
    summary="What feedback taught the relevance estimate",
    responses={200: RelevanceReport},
)
def relevance(query: RelevanceQuery) -> Response:
    """Each scope's verdicts (helpful or not), its fitted shift and the floor it implies, and
    the lessons people often mark as off-topic.

    An agent token bound to a scope reads only its own scope's verdicts; naming another
    scope is refused (403, field `scope`).
    """
    caller: agents.Caller = g.caller
    scope = query.scope.strip() if query.scope is not None else None
    if scope is not None and caller.scope is not None and scope != caller.scope:
        return problems.problem(
            403, f"this token reads only {caller.scope}'s verdicts; leave scope out", field="scope"
        )
    floor = fit_report.comment_floor(runtime().settings.min_relevance)
    with db.transaction(runtime().engine) as session:
        answer = fit_report.as_dict(session, floor, caller.view, scope)
    report = RelevanceReport.model_validate(answer)
    return Response(report.model_dump_json(), mimetype="application/json")

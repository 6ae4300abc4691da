"""GET /api/v1/gaps: recurring tickets no lesson fitted, grouped; maintainer and agent tokens."""

from __future__ import annotations

from datetime import datetime

from flask import Response, g
from flask_openapi3 import Tag
from pydantic import BaseModel, ConfigDict, Field

from playbook import agents, clock, db
from playbook.gaps import report as gaps_report
from webhooks import api as v1
from webhooks import api_parts
from webhooks.runtime import runtime
from webhooks.ui.present import Links

gaps_tag = Tag(
    name="gaps", description="Where the playbook has no lesson for a problem that recurs."
)

api = api_parts.sibling("api_gaps", __name__, v1.api)


class GapsQuery(BaseModel):
    """The window and the size of a gap."""

    model_config = ConfigDict(extra="forbid")

    days: int = Field(
        gaps_report.DAYS,
        ge=1,
        le=gaps_report.MAX_DAYS,
        description="Tickets first seen in this many days.",
    )
    min: int = Field(
        gaps_report.MINIMUM, ge=2, le=10_000, description="A gap has at least this many tickets."
    )


class GapTicket(BaseModel):
    """A ticket of a gap: its summary is the reporter's text, shown as text."""

    key: str
    title: str
    url: str | None = Field(description="Its Jira or GitHub page; null when unknown.")
    first_seen: datetime


class Gap(BaseModel):
    """Similar tickets without a lesson, oldest first, and the words they share."""

    size: int
    words: list[str] = Field(description="The most telling words, heaviest first.")
    first_seen: datetime
    last_seen: datetime
    per_week: float = Field(description="Tickets a week from the first to the last (a week min).")
    tickets: list[GapTicket]


class GapsReport(BaseModel):
    """The gaps of the window, largest then most recent first."""

    days: int
    min: int
    since: datetime
    threshold: float = Field(description="The cosine at which two tickets are linked.")
    tickets: int = Field(description="Tickets first seen in the window (the newest 5,000 at most).")
    without_lessons: int = Field(description="Of those, the ones no lesson fitted.")
    capped: bool = Field(description="True when older tickets of the window were left out.")
    gaps: list[Gap]


@api.get(
    "/gaps",
    tags=[gaps_tag],
    summary="Recurring tickets that got no lesson",
    responses={200: GapsReport},
)
def gaps(query: GapsQuery) -> Response:
    """Recent tickets no lesson fitted (held-out tickets included when none would have),
    grouped by the similarity of their text; groups of at least `min` tickets.

    An agent token bound to a scope sees only the tickets of its repository or Jira project,
    grouped among themselves, as /api/v1/stats counts only its tickets.
    """
    caller: agents.Caller = g.caller
    with db.transaction(runtime().engine) as session:
        found = gaps_report.find(
            session, now=clock.now(), days=query.days, minimum=query.min, scope=caller.view.scope
        )
    answer = GapsReport.model_validate(gaps_report.as_dict(found, Links(runtime().settings).ticket))
    return Response(answer.model_dump_json(), mimetype="application/json")

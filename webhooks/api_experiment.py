"""GET /api/v1/experiment: the holdout experiment's report, for maintainer and agent tokens."""

from __future__ import annotations

import re
from datetime import UTC, date, datetime, time
from typing import Annotated

from flask import Response, g
from flask_openapi3 import Tag
from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, WithJsonSchema, field_validator

from playbook import agents, db
from playbook.experiment import window
from webhooks import api as v1
from webhooks import api_parts
from webhooks.runtime import runtime

# The longest RFC 3339 time worth sending: 2026-11-17T10:00:00.123456+01:00 and some slack.
TIME_CHARS = 40
_DATE = r"[0-9]{4}-[0-9]{2}-[0-9]{2}"
# RFC 3339's date-time, exactly: an offset is required, so no time is read in a guessed zone.
_DATE_TIME = re.compile(
    rf"{_DATE}[Tt][0-9]{{2}}:[0-9]{{2}}:[0-9]{{2}}(\.[0-9]+)?([Zz]|[+-][0-9]{{2}}:[0-9]{{2}})"
)

experiment_tag = Tag(
    name="experiment", description="The holdout experiment: does showing lessons help?"
)

api = api_parts.sibling("api_experiment", __name__, v1.api)


def window_time(text: str, *, end: bool) -> datetime:
    """An RFC 3339 date or date-time as UTC; ValueError for anything else.

    The window ends before its ``end``: a bare date there means through that day, so the
    window ends when the next day begins.
    """
    if len(text) > TIME_CHARS:
        raise ValueError(f"at most {TIME_CHARS} characters")
    expected = "not a date (2026-11-17) or an RFC 3339 time (2026-11-17T10:00:00Z)"
    try:
        if re.fullmatch(_DATE, text):
            day = date.fromisoformat(text)
            return window.through(day) if end else datetime.combine(day, time.min, tzinfo=UTC)
        if not _DATE_TIME.fullmatch(text):
            raise ValueError(expected)
        parsed = datetime.fromisoformat(text.upper().replace("Z", "+00:00"))
    except ValueError as error:
        # Shaped right but no such day or hour (2026-02-30, 25:00): say both.
        raise ValueError(expected if str(error) == expected else f"{expected}: {error}") from None
    try:
        return parsed.astimezone(UTC)
    except OverflowError:
        # 0001-01-01T00:00:00+05:00 is before the first UTC instant Python can hold: the
        # window is then open on that side, which is what such a bound asks for.
        return (
            datetime.min.replace(tzinfo=UTC)
            if parsed.year == 1
            else datetime.max.replace(tzinfo=UTC)
        )


_TIME_SCHEMA = WithJsonSchema(
    {
        "anyOf": [
            {"type": "string", "format": "date", "maxLength": TIME_CHARS},
            {"type": "string", "format": "date-time", "maxLength": TIME_CHARS},
        ]
    }
)
WindowTime = Annotated[datetime, _TIME_SCHEMA]


class ExperimentQuery(BaseModel):
    """The window of the report, over when tickets were assigned to an arm."""

    since: WindowTime | None = Field(
        None, description="Only tickets assigned from this date (UTC) or RFC 3339 time."
    )
    until: WindowTime | None = Field(
        None, description="Only tickets assigned before this RFC 3339 time, or through this date."
    )

    @field_validator("since", "until", mode="before")
    @classmethod
    def _window(cls, value: object, info: ValidationInfo) -> object:
        """The bound as UTC; a bare date of ``until`` means through its end."""
        if value is None or isinstance(value, datetime):
            return value
        if not isinstance(value, str):
            raise ValueError("must be a date or an RFC 3339 time")
        return window_time(value, end=info.field_name == "until")


Interval = Annotated[list[float], Field(min_length=2, max_length=2)]


class EffectCounts(BaseModel):
    """Tickets of one side, those with an outcome (a linked PR merged or closed), and merged."""

    tickets: int
    with_outcome: int
    merged: int


class ArmReport(EffectCounts):
    """One arm of the experiment."""

    merge_rate: float | None = Field(description="Merged over tickets with an outcome.")
    merge_rate_ci: Interval | None = Field(description="Wilson 95% interval; null without data.")
    median_hours_to_merge: float | None = None
    median_hours_to_merge_ci: Interval | None = Field(None, description="Bootstrap 95% interval.")
    mean_review_rounds: float | None = None


class ArmsReport(BaseModel):
    """The two arms."""

    shown: ArmReport
    held_out: ArmReport


class MergeRateDifference(BaseModel):
    """Merge rate shown minus held out, with Newcombe's 95% interval."""

    merge_rate: float | None
    ci: Interval | None


class TicketsNeeded(BaseModel):
    """Tickets with an outcome per arm to detect a difference this size at 80% power."""

    points: int
    tickets_per_arm: int | None


class SampleRatio(BaseModel):
    """Arm sizes tested against the configured split; a mismatch means something is broken."""

    model_config = ConfigDict(extra="allow")

    mismatch: bool
    warning: str | None = None


class LessonEffect(BaseModel):
    """A lesson's measured effect: tickets it was shown on against those held out from it."""

    model_config = ConfigDict(extra="allow")

    id: str
    text: str
    scope: str
    shown: EffectCounts
    held_out: EffectCounts
    difference: float | None
    ci: Interval | None
    verdict: str


class RunningPeriod(BaseModel):
    """The period running now."""

    percent: int = Field(description="Share of new tickets held out, in percent.")
    started_at: datetime
    started_by: str


class ExperimentPeriod(RunningPeriod):
    """A period the experiment ran at one percent; ``stopped_at`` is null while it runs."""

    id: int
    stopped_at: datetime | None
    stopped_by: str | None


class ExperimentState(BaseModel):
    """Whether the experiment runs now, and every period it ran, oldest first."""

    running: RunningPeriod | None
    periods: list[ExperimentPeriod]


class ReportWindow(BaseModel):
    """The tickets reported on: assigned from ``since`` and before ``until`` (null: open)."""

    since: datetime | None
    until: datetime | None


class ExperimentReport(BaseModel):
    """The holdout experiment's report: the sample ratio check first, then both arms."""

    model_config = ConfigDict(extra="allow")

    experiment: ExperimentState
    window: ReportWindow
    srm: SampleRatio
    arms: ArmsReport
    difference: MergeRateDifference
    verdict: str = Field(description="One plain sentence that claims no more than the data.")
    needed: list[TicketsNeeded]
    lessons: list[LessonEffect] = Field(
        description="Lessons with enough data each side, most harmful first."
    )
    measured_harmful: list[str]
    measured_helpful: list[str]
    min_tickets: int


@api.get(
    "/experiment",
    tags=[experiment_tag],
    summary="The holdout experiment's report",
    responses={200: ExperimentReport},
)
def report(query: ExperimentQuery) -> Response:
    """Both arms' merge rates with intervals, their difference, a verdict, lessons' effects.

    An agent token bound to a scope sees the lessons of its scope and the global ones; the
    arms count every ticket in the experiment.
    """
    # The whole report's statistics (scipy, statsmodels) load inside `report.build`.
    from playbook.experiment import report as experiment

    caller: agents.Caller = g.caller
    settings = runtime().settings
    with db.transaction(runtime().engine) as session:
        built = experiment.build(
            session,
            since=query.since,
            until=query.until,
            min_tickets=settings.effect_min_tickets,
            scopes=caller.view.scopes(),
        )
    answer = ExperimentReport.model_validate(built)
    return Response(answer.model_dump_json(), mimetype="application/json")

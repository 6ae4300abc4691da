"""The agent API (/api/v1): typed routes described by OpenAPI 3.1, errors as problem+json.

Every route needs a bearer token: the maintainer token (PLAYBOOK_API_TOKEN) may do
everything; an agent token (PLAYBOOK_AGENT_TOKENS) reads, searches, records usage and
proposes, within its scope. Who a caller is comes from the token alone.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Annotated, Any, Literal

from flask import Response, g, jsonify, request
from flask_openapi3 import Tag
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from bot import callers, write_limits
from bot.consolidate import budget_for
from playbook import agents, db, work_scope
from playbook.errors import BulletNotFound, InvalidInput, InvalidTransition, PlaybookError
from playbook.lessons import fields, lifecycle
from playbook.outcomes import usage
from playbook.search.floor import Floor
from playbook.stats_answer import Stats, stats_of
from webhooks import api_parts, api_types, problems
from webhooks.api_types import (
    LESSON_ID,
    MIN_RELEVANCE_DOC,
    NO_NUL,
    NONBLANK,
    SCOPE_DOC,
    BodyFraction,
    BodyInt,
    BodyScope,
    UrlScope,
)
from webhooks.intake import decode, parse
from webhooks.runtime import runtime

# gunicorn refuses request lines over 4,094 bytes with an HTML page, and a character may take
# 12 bytes percent-encoded: the query parameters of one route fit that together.
SEARCH_Q_CHARS = 200
URL_TICKET_CHARS = 120
FILTER_CHARS = 150
CURSOR_CHARS = 100
# One request's events, and the length of its Idempotency-Key.
MAX_EVENTS = 1000
MAX_KEY_CHARS = 200

LessonId = Annotated[str, Field(min_length=1, max_length=fields.BULLET_ID_CHARS)]
TicketKey = Annotated[
    str,
    Field(
        min_length=1,
        max_length=fields.TICKET_KEY_CHARS,
        pattern=NONBLANK,
        description="A Jira key (CTMS-4410) or GitHub issue (owner/repo#12).",
        examples=["CTMS-4410"],
    ),
]
Reason = Annotated[str, Field(max_length=fields.REASON_CHARS, pattern=NO_NUL)]

lessons_tag = Tag(name="lessons", description="Read, search and propose lessons.")
maintain_tag = Tag(name="maintain", description="Approve, deprecate, restore (maintainers).")
usage_tag = Tag(name="usage", description="Report the lessons work loaded and cited.")

api = api_parts.blueprint("api", __name__)


@api.before_request
def _authenticate() -> Response | None:
    settings = runtime().settings
    if not settings.api_token and not settings.agent_tokens.strip():
        return problems.problem(
            503,
            "the agent API is disabled; set PLAYBOOK_API_TOKEN (maintainer) or "
            "PLAYBOOK_AGENT_TOKENS (agents) to enable it",
        )
    caller = callers.from_authorization(settings, request.headers.get("Authorization"))
    if caller is None:
        return problems.problem(
            401,
            "send Authorization: Bearer <token>, a PLAYBOOK_API_TOKEN or PLAYBOOK_AGENT_TOKENS "
            "token",
            field="Authorization",
            headers={"WWW-Authenticate": 'Bearer realm="playbook-bot"'},
        )
    g.caller = caller
    if request.method == "POST" and request.mimetype != "application/json":
        return problems.problem(
            415,
            f"send the body as application/json, not {request.mimetype or 'nothing'}",
            field="Content-Type",
        )
    return None


api.before_request(api_parts.once_each)  # after the token's check; siblings copy both


@api.errorhandler(PlaybookError)
def _domain_problem(error: PlaybookError) -> Response:
    if isinstance(error, BulletNotFound):
        return problems.problem(404, str(error), field="id")
    if isinstance(error, agents.Forbidden):
        return problems.problem(403, str(error), field=error.field)
    if isinstance(error, InvalidTransition):
        return problems.problem(409, str(error))
    field = getattr(error, "field", None)
    return problems.problem(400, str(error), field=field)


def _caller() -> agents.Caller:
    return g.caller


def _json(model: BaseModel, status: int = 200) -> Response:
    return Response(model.model_dump_json(), status=status, mimetype="application/json")


# -- requests ---------------------------------------------------------------------------


class LessonPath(BaseModel):
    """A lesson id in the path."""

    id: LessonId = Field(description="The lesson id, e.g. pb-12.")


class ListQuery(BaseModel):
    """Filters and a page of the lessons list."""

    status: agents.Status | None = None
    scope: Annotated[str, Field(max_length=FILTER_CHARS, pattern=NO_NUL)] | None = None
    learned_from: Annotated[str, Field(max_length=FILTER_CHARS, pattern=NO_NUL)] | None = None
    limit: int = Field(agents.PAGE_SIZE, ge=1, le=agents.MAX_PAGE_SIZE)
    cursor: Annotated[str, Field(max_length=CURSOR_CHARS, pattern=r"^[A-Za-z0-9_-]*$")] | None = (
        Field(None, description="The `next_cursor` of the previous page.")
    )


class SearchQuery(BaseModel):
    """A short task description to find lessons for (POST /search takes whole tickets)."""

    q: str = Field(
        min_length=1,
        max_length=SEARCH_Q_CHARS,
        pattern=NONBLANK,
        description="What the task is about, e.g. the ticket's summary.",
    )
    k: int = Field(5, ge=1, le=agents.MAX_K_ASKED, description="At most 10 are returned.")
    ticket: (
        Annotated[str, Field(min_length=1, max_length=URL_TICKET_CHARS, pattern=NONBLANK)] | None
    ) = Field(None, description=work_scope.TICKET_DOC)
    scope: UrlScope | None = Field(None, description=SCOPE_DOC)
    min_relevance: float | None = Field(None, ge=0, le=1, description=MIN_RELEVANCE_DOC)
    paths: api_types.SearchPaths | None = Field(None, description=api_types.SEARCH_PATHS_DOC)


class SearchBody(BaseModel):
    """A task description or a whole ticket's text to find lessons for."""

    model_config = ConfigDict(extra="forbid")

    query: str = Field(
        min_length=1,
        max_length=agents.QUERY_CHARS,
        pattern=NONBLANK,
        description="The ticket's text: first line the summary, then the description.",
    )
    k: BodyInt = Field(5, ge=1, le=agents.MAX_K_ASKED, description="At most 10 are returned.")
    ticket: TicketKey | None = Field(None, description=work_scope.TICKET_DOC)
    scope: BodyScope | None = Field(None, description=SCOPE_DOC)
    min_relevance: BodyFraction | None = Field(None, description=MIN_RELEVANCE_DOC)
    paths: api_types.SearchPaths | None = Field(None, description=api_types.SEARCH_PATHS_DOC)


class ProposeBody(BaseModel):
    """A lesson an agent learned, and the ticket it learned it from."""

    model_config = ConfigDict(extra="forbid")

    text: str = Field(
        min_length=1, max_length=fields.MAX_LESSON_CHARS, pattern=NONBLANK, examples=["..."]
    )
    learned_from: TicketKey
    tags: list[Annotated[str, Field(max_length=fields.TAG_CHARS, pattern=NO_NUL)]] | None = Field(
        None, max_length=fields.MAX_TAGS
    )
    scope: (
        Annotated[str, Field(min_length=1, max_length=fields.SCOPE_CHARS, pattern=NONBLANK)] | None
    ) = Field(None, description="Maintainers only; an agent's lessons go to its token's scope.")
    paths: api_types.AnchorPaths | None = None
    symbols: api_types.AnchorSymbols | None = None


class ReasonBody(BaseModel):
    """Why: recorded in the lesson's revision history."""

    model_config = ConfigDict(extra="forbid")

    reason: Reason | None = None


class DeprecateBody(BaseModel):
    """Why the lesson is deprecated: shown as its demoted_reason."""

    model_config = ConfigDict(extra="forbid")

    reason: str = Field(min_length=1, max_length=fields.REASON_CHARS, pattern=NONBLANK)


_EventLessonId = Annotated[
    str, Field(min_length=1, max_length=fields.BULLET_ID_CHARS, pattern=LESSON_ID)
]


class UsageEvent(BaseModel):
    """One load or cite, as agents write it to `.lesson-usage.jsonl`."""

    event: Literal["loaded", "cited"]
    lessonIds: (
        _EventLessonId
        | Annotated[list[_EventLessonId], Field(min_length=1, max_length=usage.MAX_IDS_PER_EVENT)]
    ) = Field(description="The lessons: one id or a list.")
    ticketId: TicketKey
    phase: Annotated[str, Field(max_length=fields.PHASE_CHARS, pattern=NO_NUL)] | None = None
    consumer: Annotated[str, Field(max_length=fields.CONSUMER_CHARS, pattern=NO_NUL)] | None = (
        Field(None, description="Who used the lesson; by default the token's agent.")
    )
    phaseSuccess: bool | None = Field(None, description="For cites: did the work succeed?")
    ts: agents.Timestamp | None = None
    rank: int | None = Field(None, ge=0, le=usage.MAX_RANK)
    queryId: Annotated[str, Field(max_length=fields.QUERY_ID_CHARS, pattern=NO_NUL)] | None = None


# -- answers ----------------------------------------------------------------------------


class BulletAnswer(BaseModel):
    """A lesson in the answer shape of the first API version."""

    status: Literal["ok"]
    bullet: dict[str, Any]


class UsageRecorded(BaseModel):
    """How many usage events were new, and what they weigh (see the README's security model)."""

    status: Literal["recorded"]
    events: int = Field(description="New events (each (ticket, lesson, kind) counts once).")
    counted: int = Field(0, description="Of them, those that count as use of the lesson.")
    rated: int = Field(0, description="Of them, cites whose phaseSuccess rates the lesson.")
    discounted: dict[str, int] = Field(
        default_factory=dict,
        description="Events weighing less than they claim, by reason: unknown_ticket (moves "
        "nothing), one_per_source or needs_pr_evidence (the outcome rates nothing).",
    )


# -- routes -----------------------------------------------------------------------------


@api.get(
    "/lessons",
    tags=[lessons_tag],
    summary="List lessons",
    responses={200: agents.LessonPage},
)
def list_lessons(query: ListQuery) -> Response:
    """Lessons in id order, filtered by status, scope and source ticket; cursor pages."""
    with db.transaction(runtime().engine) as session:
        page = agents.list_lessons(
            session,
            _caller(),
            status=query.status,
            scope=query.scope,
            learned_from=query.learned_from,
            limit=query.limit,
            cursor=query.cursor,
        )
    return _json(page)


@api.get(
    "/lessons/<id>",
    tags=[lessons_tag],
    summary="Get a lesson",
    responses={200: agents.LessonDetail, 404: problems.RESPONSE},
)
def get_lesson(path: LessonPath) -> Response:
    """A lesson with counters, status, latest revisions, usage events and measured effect."""
    minimum = runtime().settings.effect_min_tickets
    with db.transaction(runtime().engine) as session:
        detail = agents.get_lesson(session, _caller(), _lesson_id(path.id), min_tickets=minimum)
    return _json(detail)


@api.get(
    "/search",
    tags=[lessons_tag],
    summary="Search lessons for a task",
    responses={200: agents.SearchAnswer, 403: problems.RESPONSE},
)
def search(query: SearchQuery) -> Response:
    """The lessons that fit a task, ranked as the bot ranks them for a new ticket."""
    return _search(query, query.q)


@api.post(
    "/search",
    tags=[lessons_tag],
    summary="Search lessons for a whole ticket",
    responses={200: agents.SearchAnswer, 403: problems.RESPONSE},
)
def search_ticket(body: SearchBody) -> Response:
    """Like GET /search, for a ticket's whole text (up to 10,000 characters)."""
    return _search(body, body.query)


def _search(ask: SearchQuery | SearchBody, text: str) -> Response:
    settings = runtime().settings
    with db.transaction(runtime().engine) as session:
        answer = agents.search(
            session,
            _caller(),
            text,
            k=ask.k,
            ticket=ask.ticket,
            scope=ask.scope,
            max_chars=settings.comment_max_chars,
            experiment=settings.experiment,
            min_relevance=ask.min_relevance,
            floor=Floor.of(settings.min_relevance),
            paths=ask.paths or (),
        )
    return _json(answer)


@api.post(
    "/lessons",
    tags=[lessons_tag],
    summary="Propose a lesson",
    responses={
        200: agents.ProposeAnswer,
        201: agents.ProposeAnswer,
        403: problems.RESPONSE,
        429: problems.RESPONSE,
    },
)
def propose(body: ProposeBody) -> Response:
    """Add a proposed lesson (201), or name the live lesson it nearly duplicates (200)."""
    limited = _limit_writes()
    if limited is not None:
        return limited
    settings = runtime().settings
    with db.transaction(runtime().engine) as session:
        answer = agents.propose(
            session,
            _caller(),
            body.text,
            body.learned_from,
            tags=body.tags,
            scope=body.scope,
            max_chars=settings.max_lesson_chars,
            **body.model_dump(include={"paths", "symbols"}),
        )
    return _json(answer, 201 if answer.created else 200)


_CHANGE = {
    200: agents.Change,
    403: problems.RESPONSE,
    404: problems.RESPONSE,
    409: problems.RESPONSE,
}


@api.post(
    "/lessons/<id>/approve", tags=[maintain_tag], summary="Approve a proposal", responses=_CHANGE
)
def approve(path: LessonPath, body: ReasonBody) -> Response:
    """Make a proposed lesson active (maintainer token)."""
    return _change(agents.approve, path, body.reason)


@api.post(
    "/lessons/<id>/deprecate", tags=[maintain_tag], summary="Deprecate a lesson", responses=_CHANGE
)
def deprecate(path: LessonPath, body: DeprecateBody) -> Response:
    """Soft-deprecate a lesson with a reason (maintainer token); it is kept, not deleted."""
    return _change(agents.deprecate, path, body.reason)


@api.post(
    "/lessons/<id>/restore", tags=[maintain_tag], summary="Restore a lesson", responses=_CHANGE
)
def restore(path: LessonPath, body: ReasonBody) -> Response:
    """Bring a deprecated or archived lesson back to active (maintainer token)."""
    return _change(agents.restore, path, body.reason)


def _change(action: Callable[..., agents.Change], path: LessonPath, reason: str | None) -> Response:
    with db.transaction(runtime().engine) as session:
        return _json(action(session, _caller(), _lesson_id(path.id), reason))


@api.get("/stats", tags=[lessons_tag], summary="Playbook statistics", responses={200: Stats})
def stats() -> Response:
    """Lessons by status and scope, loads, cites, outcomes, coverage and cite rate, and each
    scope's size against its context budget.

    An agent token bound to a scope gets the report of what it may read: its scope's and
    the global lessons, their usage in its own work, and searches for its tickets.
    """
    budgets = budget_for(runtime())
    with db.transaction(runtime().engine) as session:
        report = stats_of(session, _caller(), runtime().settings.effect_min_tickets, budgets)
    return _json(report)


@api.get(
    "/bullets/<id>",
    tags=[lessons_tag],
    summary="Get a lesson (first API version)",
    responses={200: BulletAnswer, 404: problems.RESPONSE},
)
def get_bullet(path: LessonPath) -> Response:
    """One lesson with its counters, in the shape of the first API version."""
    with db.transaction(runtime().engine) as session:
        bullet = agents.visible(session, _caller(), _lesson_id(path.id))
        data = lifecycle.as_dict(bullet)
    for key, value in data.items():
        if hasattr(value, "isoformat"):
            data[key] = value.isoformat()
    return jsonify(status="ok", bullet=data)


@api.post(
    "/usage",
    tags=[usage_tag],
    summary="Record loads and cites",
    responses={
        201: UsageRecorded,
        404: problems.RESPONSE,
        403: problems.RESPONSE,
        429: problems.RESPONSE,
    },
)
def post_usage() -> Response:
    """Record loads and cites: one event or a list, in the `.lesson-usage.jsonl` shape.

    All or nothing: one bad event rejects the request, so an agent can fix and resend it.
    Every event names its ticket (``ticketId``), and each (ticket, lesson, kind) counts
    once, so a resent request records nothing twice with or without an Idempotency-Key.
    What the events weigh is in the answer (playbook/outcomes/self_reports.py decides it).
    """
    limited = _limit_writes()
    if limited is not None:
        return limited
    body = parse(decode(request.get_data(cache=True)), lists=True)
    items = body if isinstance(body, list) else [body]
    if len(items) > MAX_EVENTS:
        return problems.problem(400, f"at most {MAX_EVENTS} events per request", field="body")
    if not items:
        return problems.problem(400, "no events in the body", field="body")
    caller = _caller()
    events = []
    for position, item in enumerate(items, start=1):
        # The documented limits first, on the event as sent: parsing drops repeated ids.
        beyond = _beyond_limits(item, position, listed=isinstance(body, list))
        if beyond is not None:
            return beyond
        try:
            event = usage.parse_agent_event(item)
        except PlaybookError as problem:
            return problems.problem(
                400, f"event {position}: {problem}", field=f"body[{position - 1}]"
            )
        events.append(dataclasses.replace(event, consumer=event.consumer or caller.actor))
    # Agents written for earlier versions send an Idempotency-Key; it is still checked like
    # any header we read, though the ticket now makes every event count once by itself.
    key = request.headers.get("Idempotency-Key", "").strip()
    if len(key) > MAX_KEY_CHARS or not key.isascii():
        return problems.problem(
            400,
            f"Idempotency-Key must be at most {MAX_KEY_CHARS} ASCII characters",
            field="Idempotency-Key",
        )
    tally = usage.Tally()
    credit = runtime().settings.superseded_cites_count_for_replacement
    try:
        with db.transaction(runtime().engine) as session:
            for position, event in enumerate(events, start=1):
                try:
                    new = agents.record_event(session, caller, event, credit_replacement=credit)
                    tally.add(new)
                except PlaybookError as problem:
                    raise _Rejected(position, problem) from None
    except _Rejected as rejected:
        status, field = 404 if isinstance(rejected.problem, BulletNotFound) else 400, "lessonIds"
        if isinstance(rejected.problem, agents.Forbidden):  # a ticket of another scope
            listed = isinstance(body, list)
            status, field = 403, f"body[{rejected.position - 1}].ticketId" if listed else "ticketId"
        detail = f"event {rejected.position}: {rejected.problem}"
        return problems.problem(status, detail, field=field)
    answer = UsageRecorded(
        status="recorded",
        events=tally.recorded,
        counted=tally.counted,
        rated=tally.rated,
        discounted=tally.discounted or {},
    )
    return _json(answer, 201)


def _limit_writes() -> Response | None:
    """429 with Retry-After once the caller's token passed its writes for this minute."""
    try:
        write_limits.check(runtime().settings, runtime().engine, _caller())
    except write_limits.TooManyWrites as error:
        retry = {"Retry-After": str(error.retry_after)}
        return problems.problem(429, str(error), field="Authorization", headers=retry)
    return None


# The documented upper bounds (maxItems, maxLength, maximum) as pydantic names their breach.
_LIMIT_ERRORS = frozenset({"too_long", "string_too_long", "less_than_equal", "less_than"})
# The older names an event may use, read when the documented one is absent (as parsed).
_ALIASES = {"lessonIds": "lessonId", "ticketId": "ticket", "phaseSuccess": "success"}


def _beyond_limits(item: Any, position: int, *, listed: bool) -> Response | None:
    """A 400 naming the field when a raw event breaks a limit the OpenAPI document states.

    The parser forgives repeats and white space (a list naming pb-1 5,000 times is one
    mention), so the documented limits are checked first, on the event as sent.
    """
    if not isinstance(item, dict):
        return None
    sent = dict(item)
    for name, alias in _ALIASES.items():
        if sent.get(name) is None and sent.get(alias) is not None:
            sent[name] = sent[alias]
    if sent.get("queryId") is None and sent.get("query_id") is not None:
        sent["queryId"] = sent["query_id"]
    try:
        UsageEvent.model_validate(sent)
    except ValidationError as error:
        for problem in error.errors(include_url=False, include_input=False):
            if problem["type"] in _LIMIT_ERRORS:
                # Union branches add type tags to the location; the field and index remain.
                loc = problem["loc"]
                where = ".".join(str(p) for p in loc if p == loc[0] or isinstance(p, int))
                field = f"body[{position - 1}].{where}" if listed else where
                return problems.problem(
                    400, f"event {position}: {where}: {problem['msg']}", field=field
                )
    return None


def _lesson_id(value: str) -> str:
    """A path id: one that cannot be an id is simply not found."""
    try:
        return fields.bullet_id(value)
    except InvalidInput:
        raise BulletNotFound(value.strip()[:64]) from None


class _Rejected(Exception):
    def __init__(self, position: int, problem: PlaybookError) -> None:
        super().__init__(str(problem))
        self.position = position
        self.problem = problem


def document(spec: dict[str, Any]) -> None:
    """Describe POST /usage's body in ``spec``: one event or a list (parsed by hand, so the
    messages stay those agents already know)."""
    schema = UsageEvent.model_json_schema(ref_template="#/components/schemas/{model}")
    components = spec.setdefault("components", {}).setdefault("schemas", {})
    components.update(schema.pop("$defs", {}))
    components["UsageEvent"] = schema
    event = {"$ref": "#/components/schemas/UsageEvent"}
    spec["paths"]["/api/v1/usage"]["post"]["requestBody"] = {
        "required": True,
        "content": {
            "application/json": {
                "schema": {
                    "oneOf": [
                        event,
                        {"type": "array", "items": event, "minItems": 1, "maxItems": MAX_EVENTS},
                    ]
                }
            }
        },
    }

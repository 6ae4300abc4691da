"""What agents and maintainers may do through the HTTP API and MCP: typed answers, scope rules.

Both doors call these functions with a ``Caller`` made from a verified token (or the local
user of ``playbook-bot mcp``), never from what a request says about itself: the caller's
scope decides which lessons it sees and where its proposals go, and only a maintainer may
approve, deprecate or restore.
"""

from __future__ import annotations

import base64
import re
from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, Field
from sqlalchemy import select
from sqlalchemy.orm import Session

from playbook import clock, scope_links
from playbook.errors import BulletNotFound, Forbidden
from playbook.experiment import holdout
from playbook.lessons import checks, fields, lifecycle, replacements
from playbook.models import Bullet, Revision, UsageEvent
from playbook.outcomes import usage
from playbook.repos import stored
from playbook.scopes import View
from playbook.search import ranking, search_scope
from playbook.search.floor import Floor, default_min_relevance
from playbook.search.relevance import strength
from playbook.search.retrieval import ALL_SCOPES, Retriever
from playbook.search.text import Ticket
from playbook.search_answer import Hit, SearchAnswer
from playbook.work_scope import check_learned_from, check_ticket, optional_ticket, required_ticket

# Lessons one search returns at most, whatever ``k`` asks: an agent's context is precious,
# and the bot's own comment shows no more.
MAX_K = 10
# The largest ``k`` a request may name; anything above MAX_K is answered with MAX_K lessons.
MAX_K_ASKED = 100
# A task description or ticket text; retrieval reads the summary and 500 characters of it.
QUERY_CHARS = 10_000
PAGE_SIZE = 50
MAX_PAGE_SIZE = 200
REVISIONS_SHOWN = 10
EVENTS_SHOWN = 20
_CURSOR = re.compile(r"[A-Za-z0-9_-]*")
Role = Literal["maintainer", "agent"]
Kind = Literal["loaded", "cited"]
Status = Literal["proposed", "active", "deprecated", "archived", "superseded"]


def _text_time(value: object) -> object:
    # pydantic's datetime also reads numbers, which would let one past the documented
    # maximum of the number form through as a date: numbers are the other form's.
    if isinstance(value, int | float):
        raise ValueError("a number is a Unix time, not an ISO 8601 string")
    return value


# When a load or cite happened: ISO 8601, or Unix seconds or milliseconds (up to year 3000).
Timestamp = (
    Annotated[datetime, BeforeValidator(_text_time)]
    | Annotated[float, Field(ge=0, le=32_503_680_000_000)]
)


@dataclass(frozen=True)
class Caller:
    """Who is asking, from a verified token: the actor recorded, the role, the scope."""

    actor: str
    role: Role
    # The repository or Jira project the caller works in; None: every scope.
    scope: str | None = None

    @property
    def view(self) -> View:
        """What the caller may read: the one scope filter every agent read goes through."""
        return View(scope=self.scope, actor=self.actor)

    def sees(self, bullet: Bullet) -> bool:
        """True when the lesson is in the caller's scope (or global)."""
        return self.view.sees_scope(bullet.scope)

    def require_maintainer(self, action: str) -> None:
        """Raise Forbidden unless the caller is a maintainer."""
        if self.role != "maintainer":
            raise Forbidden(f"only a maintainer may {action} a lesson; agents may propose")


class Lesson(BaseModel):
    """A lesson with its counters and lifecycle state."""

    id: str
    text: str
    status: Status
    scope: str
    learned_from: str | None
    section: str
    tags: list[str]
    source: str | None
    source_url: str | None
    loads: int
    cites: int
    cites_success: int = Field(description="Cites in work that was merged.")
    cites_failure: int = Field(description="Cites in work that was closed unmerged.")
    confidence: float = Field(description="Share of merged cites, with a prior; 0.5 unrated.")
    created_at: datetime
    updated_at: datetime
    last_loaded_at: datetime | None
    last_cited_at: datetime | None
    demoted_on: datetime | None
    demoted_reason: str | None
    superseded_by: str | None = Field(
        None, description="The lesson that replaces this one, while its status is superseded."
    )
    paths: list[str] | None = Field(None, description="Repository globs it is about.")
    symbols: list[str] | None = Field(None, description="Function or class names it is about.")


class RevisionEntry(BaseModel):
    """One change of a lesson: what, by whom, when and why."""

    id: int
    action: str
    actor: str
    at: datetime
    reason: str | None


class UsageEntry(BaseModel):
    """One load or cite of a lesson, with the ticket (and PR) it was for."""

    kind: Kind
    ticket: str | None
    pull_request: str | None
    consumer: str | None
    success: bool | None = Field(description="The PR merged (true), closed (false) or pending.")
    at: datetime


class Ratings(BaseModel):
    """A lesson's model ratings: how many, and their mean score in [-1, 1] (None: not rated)."""

    count: int = 0
    mean: float | None = None


class LessonDetail(Lesson):
    """A lesson with its latest revisions and usage events, newest first."""

    supersedes: list[str] = Field(
        default_factory=list, description="The lessons this one replaces (superseded by it)."
    )
    revisions: list[RevisionEntry]
    events: list[UsageEntry]
    effect: dict[str, Any] | None = Field(
        None,
        description="Its measured effect in the holdout experiment: `shown` and `held_out` "
        "(tickets, with_outcome, merged), `difference`, `ci` and `verdict`.",
    )
    ratings: Ratings = Field(
        default_factory=Ratings,
        description="How a model rated the lesson on PRs it was shown for and not cited in; "
        "a higher mean ranks it higher.",
    )


class UsageAnswer(BaseModel):
    """How many of the reported loads or cites were new (each counts once per ticket)."""

    ticket: str
    kind: Kind
    lesson_ids: list[str]
    recorded: int
    # Of the new ones, those that count as use; the rest are about a ticket the bot has not
    # seen and move nothing (playbook/outcomes/self_reports.py), by reason in ``discounted``.
    counted: int = 0
    discounted: dict[str, int] = {}


class SimilarLesson(BaseModel):
    """A live lesson sharing many words with a new one: perhaps one it should supersede."""

    id: str
    overlap: float = Field(description="Share of words shared with the new lesson.")


class ProposeAnswer(BaseModel):
    """A new proposed lesson, or the live lesson it nearly duplicates (nothing created)."""

    created: bool
    duplicate_of: str | None = Field(description="The near-duplicate that already exists.")
    overlap: float | None = Field(description="Share of words shared with the duplicate.")
    similar_to: SimilarLesson | None = Field(
        None,
        description="Created, but much like this live lesson: a maintainer may supersede it "
        "(POST /api/v1/lessons/{id}/supersede) instead of keeping both.",
    )
    lesson: Lesson


class Change(BaseModel):
    """A lifecycle action's result: ``changed`` is false when the lesson already was so."""

    changed: bool
    lesson: Lesson


class LessonPage(BaseModel):
    """One page of lessons in id order; pass ``next_cursor`` as ``cursor`` for the next."""

    lessons: list[Lesson]
    next_cursor: str | None


def lesson(bullet: Bullet, hide_link: bool = False) -> Lesson:
    """The API shape of a bullet; ``hide_link``: without its replacement (`scope_links`)."""
    return Lesson(
        id=bullet.id,
        text=bullet.text,
        status=bullet.status,  # type: ignore[arg-type]
        scope=bullet.scope,
        learned_from=bullet.learned_from,
        section=bullet.section,
        tags=list(bullet.tags or []),
        source=bullet.source,
        source_url=bullet.source_url,
        loads=bullet.loads,
        cites=bullet.cites,
        cites_success=bullet.cites_success,
        cites_failure=bullet.cites_failure,
        confidence=round(ranking.confidence(bullet.cites_success, bullet.cites_failure), 6),
        created_at=bullet.created_at,
        updated_at=bullet.updated_at,
        last_loaded_at=bullet.last_loaded_at,
        last_cited_at=bullet.last_cited_at,
        demoted_on=bullet.demoted_on,
        demoted_reason=None if hide_link else bullet.demoted_reason,
        superseded_by=None if hide_link else bullet.superseded_by,
        paths=bullet.paths or None,
        symbols=bullet.symbols or None,
    )


def visible(session: Session, caller: Caller, bullet_id: str) -> Bullet:
    """The bullet, if it exists in the caller's scope; else BulletNotFound (not a 403: an
    agent of one project learns nothing about another's lessons)."""
    checked = fields.bullet_id(bullet_id)
    bullet = session.get(Bullet, checked)
    if bullet is None or not caller.sees(bullet):
        raise BulletNotFound(checked, "search_lessons or GET /api/v1/lessons lists the ids")
    return bullet


def get_lesson(
    session: Session, caller: Caller, bullet_id: str, *, min_tickets: int = 20
) -> LessonDetail:
    """A lesson with counters, status, its last revisions and usage events, and its measured
    effect (``min_tickets``: PLAYBOOK_EFFECT_MIN_TICKETS, whose default is 20)."""
    from playbook.experiment import report  # the experiment's tables: when a lesson is read

    bullet = visible(session, caller, bullet_id)
    revisions = session.scalars(
        select(Revision)
        .where(Revision.bullet_id == bullet.id)
        .order_by(Revision.id.desc())
        .limit(REVISIONS_SHOWN)
    )
    events = session.scalars(
        select(UsageEvent)
        .where(UsageEvent.bullet_id == bullet.id, caller.view.events())
        .order_by(UsageEvent.ts.desc(), UsageEvent.id.desc())
        .limit(EVENTS_SHOWN)
    )
    return LessonDetail(
        **lesson(bullet, bool(scope_links.hidden(session, caller.view, [bullet]))).model_dump(),
        supersedes=replacements.superseded_by_it(session, bullet.id, caller.view.lessons()),
        revisions=[
            RevisionEntry(id=r.id, action=r.action, actor=r.actor, at=r.at, reason=r.reason)
            for r in scope_links.readable(session, caller.view, revisions)
        ],
        events=[
            UsageEntry(
                kind=e.kind,  # type: ignore[arg-type]
                ticket=e.ticket_key,
                pull_request=e.pr_key,
                consumer=e.consumer,
                success=e.success,
                at=e.ts,
            )
            for e in events
        ],
        effect=report.lesson_effect(session, bullet.id, min_tickets=min_tickets),
        ratings=Ratings(
            count=bullet.ratings,
            mean=round(bullet.rating_sum / bullet.ratings, 6) if bullet.ratings else None,
        ),
    )


def search(
    session: Session,
    caller: Caller,
    query: str,
    *,
    k: int = 5,
    ticket: str | None = None,
    max_chars: int | None = None,
    experiment: holdout.Config = holdout.OFF,
    min_relevance: float | None = None,
    floor: Floor | None = None,
    scope: str | None = None,
    paths: list[str] | tuple[str, ...] = (),
) -> SearchAnswer:
    """The lessons that fit ``query`` (first line: the summary), as the bot ranks them.

    Each carries its relevance estimate; with ``min_relevance`` those below it are left out
    (an agent asked, so by default none is: the bot's own floor is for its comments). ``fit``
    words are read against ``floor``, the installation's (the packaged default without one).

    ``ticket`` and ``scope`` choose the lessons searched (``search_scope``, said in ``searched``).
    With ``ticket``, the lessons returned are recorded as loaded for it, once per ticket.
    At most MAX_K lessons, whose texts fit ``max_chars`` together (the comment budget).
    A ticket in the holdout's held-out arm gets none: what would have been returned is kept
    as would-have-shown exposures, never as loads.
    """
    text = fields.bounded(query, "query", QUERY_CHARS).strip()
    if not text:
        raise fields.FieldProblem("query", "is empty; describe the task or paste the ticket")
    if k < 1:
        raise fields.FieldProblem("k", "must be at least 1")
    if min_relevance is not None and not 0.0 <= min_relevance <= 1.0:
        raise fields.FieldProblem("min_relevance", "must be between 0 and 1")
    floor = floor or Floor.of(default_min_relevance())
    key = optional_ticket(caller.view, ticket, "ticket")  # refused: another scope's work
    # The one rule of every door: the ticket's scope, the scope named, or all the caller sees.
    searched = search_scope.searched(
        session, caller.view, ticket=key, scope=search_scope.checked_scope(scope)
    )
    retriever = Retriever.shared(session)
    now = clock.now()
    arm = holdout.arm_for(session, experiment, key, now, stored.holdout_percent(session, key))
    result = retriever.search(
        session,
        Ticket.from_text(text, key=key, scope=searched.primary, paths=paths),
        k=min(k, MAX_K),
        max_chars=max_chars,
        record=key is not None and arm != "held_out",
        scopes=ALL_SCOPES if searched.scopes is None else searched.scopes,
        consumer=caller.actor,
        # The ticket is the agent's word: an invented one must not keep lessons from pruning.
        source=caller.actor,
        min_relevance=min_relevance,
    )
    if key is not None and arm is not None:
        ranked = [(hit.bullet_id, hit.rank) for hit in result.hits]
        holdout.record_exposures(
            session, key, arm, ranked, query_id=result.query_id, consumer=caller.actor, now=now
        )
    if arm == "held_out":
        return SearchAnswer(
            query_id=result.query_id,
            ticket=key,
            loads_recorded=0,
            searched=searched,
            lessons=[],
            held_out=True,
            reason=holdout.HELD_OUT_REASON,
        )
    return SearchAnswer(
        query_id=result.query_id,
        ticket=key,
        loads_recorded=len(result.hits) if key else 0,
        searched=searched,
        lessons=[
            Hit(
                rank=hit.rank,
                id=hit.bullet_id,
                text=hit.text,
                learned_from=hit.learned_from,
                scope=hit.scope,
                score=round(hit.score, 6),
                confidence=round(hit.confidence, 6),
                similarity=hit.similarity,
                text_rank=hit.text_rank,
                relevance=round(hit.relevance or 0.0, 4),
                fit=strength(hit.relevance or 0.0, floor.lesson),
                matched=list(hit.matched),
            )
            for hit in result.hits
        ],
        rerank=result.rerank,
        rerank_reason=result.rerank_reason,
    )


def record_usage(
    session: Session,
    caller: Caller,
    ticket: str,
    lesson_ids: list[str],
    kind: str,
    *,
    credit_replacement: bool = False,
) -> UsageAnswer:
    """Record that lessons were loaded or cited for work on ``ticket``, each once per ticket.

    ``credit_replacement`` (PLAYBOOK_SUPERSEDED_CITES_COUNT_FOR_REPLACEMENT): a cite of a
    superseded lesson cites its replacement too, and ``recorded`` counts both.
    """
    if kind not in ("loaded", "cited"):
        raise fields.FieldProblem("kind", f"must be loaded or cited, not {kind!r}")
    key = required_ticket(caller.view, ticket, "ticket")
    if not lesson_ids:
        raise fields.FieldProblem("lesson_ids", "is empty; name the lessons, e.g. pb-12")
    if len(lesson_ids) > usage.MAX_IDS_PER_EVENT:
        raise fields.FieldProblem(
            "lesson_ids", f"names {len(lesson_ids)} lessons, over {usage.MAX_IDS_PER_EVENT}"
        )
    ids = list(dict.fromkeys(visible(session, caller, i).id for i in lesson_ids))
    events = usage.record_once(
        session,
        kind,
        ids,
        ticket_key=key,
        consumer=caller.actor,
        source=caller.actor,
        credit_replacement=credit_replacement,
    )
    tally = usage.Tally()
    tally.add(events)
    return UsageAnswer(
        ticket=key,
        kind=kind,  # type: ignore[arg-type]
        lesson_ids=ids,
        recorded=tally.recorded,
        counted=tally.counted,
        discounted=tally.discounted or {},
    )


def record_event(
    session: Session,
    caller: Caller,
    event: usage.AgentEvent,
    *,
    credit_replacement: bool = False,
) -> list[UsageEvent]:
    """Record one reported event as the caller's: its ticket and each lesson in its scope."""
    check_ticket(caller.view, event.ticket_key, "ticketId")
    for bullet_id in event.bullet_ids:
        visible(session, caller, bullet_id)
    return usage.record_agent_event(
        session, event, source=caller.actor, credit_replacement=credit_replacement
    )


def propose(
    session: Session,
    caller: Caller,
    text: str,
    learned_from: str,
    *,
    tags: list[str] | None = None,
    scope: str | None = None,
    max_chars: int = fields.MAX_LESSON_CHARS,
    **anchors: list[str] | None,
) -> ProposeAnswer:
    """Add a ``proposed`` lesson (active once a maintainer approves it or its PR merges).

    An agent's proposal goes to its own scope (global when it has none); only a maintainer
    names another. A near-duplicate of a live lesson in that scope creates nothing.
    """
    if scope is not None and caller.role != "maintainer" and scope != caller.scope:
        raise Forbidden("an agent's lessons go to its token's scope; leave scope out")
    check_learned_from(caller.view, learned_from)
    result = lifecycle.add(
        session,
        text,
        learned_from=learned_from,
        actor=caller.actor,
        tags=tags,
        scope=scope or caller.scope or "global",
        status="proposed",
        source="agent" if caller.role == "agent" else "api",
        max_chars=max_chars,
        **anchors,  # paths and symbols (`playbook.anchors.fields` checks them)
    )
    return ProposeAnswer(
        created=result.created,
        duplicate_of=None if result.created else result.bullet.id,
        overlap=None if result.created else round(result.overlap, 6),
        # Compared within the scope the lesson went to, which the caller may read.
        similar_to=SimilarLesson(**vars(result.similar)) if result.similar else None,
        lesson=lesson(result.bullet),
    )


def approve(session: Session, caller: Caller, bullet_id: str, reason: str | None) -> Change:
    """Make a proposed lesson active (maintainers only)."""
    caller.require_maintainer("approve")
    bullet = visible(session, caller, bullet_id)
    change = lifecycle.approve(session, bullet.id, actor=caller.actor, reason=_reason(reason))
    return Change(changed=change.changed, lesson=lesson(change.bullet))


def deprecate(session: Session, caller: Caller, bullet_id: str, reason: str) -> Change:
    """Soft-deprecate a lesson with a reason (maintainers only)."""
    caller.require_maintainer("deprecate")
    bullet = visible(session, caller, bullet_id)
    why = _reason(reason)
    if not why:
        raise fields.FieldProblem("reason", "is empty; say why the lesson is deprecated")
    change = lifecycle.deprecate(session, bullet.id, reason=why, actor=caller.actor)
    return Change(changed=change.changed, lesson=lesson(change.bullet))


def supersede(
    session: Session, caller: Caller, bullet_id: str, by: str, reason: str | None
) -> Change:
    """Mark a lesson superseded by the live lesson ``by`` (maintainers only); `restore`
    undoes it."""
    caller.require_maintainer("supersede")
    bullet = visible(session, caller, bullet_id)
    try:
        new = visible(session, caller, fields.bullet_id(by, "by"))
    except BulletNotFound as missing:
        raise BulletNotFound(missing.bullet_id, field="by") from None
    change = lifecycle.supersede(
        session, bullet.id, new.id, actor=caller.actor, reason=_reason(reason)
    )
    return Change(changed=change.changed, lesson=lesson(change.bullet))


def restore(session: Session, caller: Caller, bullet_id: str, reason: str | None) -> Change:
    """Bring a deprecated, archived or superseded lesson back to active (maintainers only)."""
    caller.require_maintainer("restore")
    bullet = visible(session, caller, bullet_id)
    change = lifecycle.restore(session, bullet.id, actor=caller.actor, reason=_reason(reason))
    return Change(changed=change.changed, lesson=lesson(change.bullet))


def _reason(reason: str | None) -> str | None:
    if reason is None:
        return None
    return fields.text(reason, "reason", fields.REASON_CHARS) or None


def list_lessons(
    session: Session,
    caller: Caller,
    *,
    status: str | None = None,
    scope: str | None = None,
    learned_from: str | None = None,
    limit: int = PAGE_SIZE,
    cursor: str | None = None,
) -> LessonPage:
    """Lessons in id order, filtered; keyset pages, so a page never repeats or skips a row."""
    query = select(Bullet).order_by(Bullet.id).limit(min(max(limit, 1), MAX_PAGE_SIZE) + 1)
    if status is not None:
        query = query.where(Bullet.status == checks.check_status(status))
    if scope is not None:
        query = query.where(Bullet.scope == fields.text(scope, "scope", fields.SCOPE_CHARS))
    query = query.where(caller.view.lessons())
    if learned_from is not None:
        ticket = fields.text(learned_from, "learned_from", fields.TICKET_KEY_CHARS)
        query = query.where(Bullet.learned_from == ticket)
    if cursor:
        query = query.where(Bullet.id > decode_cursor(cursor))
    rows = list(session.scalars(query))
    size = min(max(limit, 1), MAX_PAGE_SIZE)
    more = len(rows) > size
    rows, hidden = rows[:size], scope_links.hidden(session, caller.view, rows[:size])
    return LessonPage(
        lessons=[lesson(bullet, bullet.id in hidden) for bullet in rows],
        next_cursor=encode_cursor(rows[-1].id) if more else None,
    )


def encode_cursor(bullet_id: str) -> str:
    """An opaque cursor after ``bullet_id``."""
    return base64.urlsafe_b64encode(bullet_id.encode()).decode().rstrip("=")


def decode_cursor(cursor: str) -> str:
    """The lesson id a cursor continues after.

    Total over URL-safe base64 text: a cursor is only a position in id order, so one that
    was not returned by the API still names a position, and gives the page after it.
    """
    if len(cursor) > 200 or not _CURSOR.fullmatch(cursor):
        raise fields.FieldProblem("cursor", "is not a cursor this API returned")
    usable = cursor[: len(cursor) - (len(cursor) % 4 == 1)]
    raw = base64.urlsafe_b64decode(usable + "=" * (-len(usable) % 4))
    return raw.decode("utf-8", "replace").replace("\x00", "")

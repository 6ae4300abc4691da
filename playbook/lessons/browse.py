"""What the maintainers' web page shows: lessons filtered, sorted and paged, and their history."""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from sqlalchemy import ColumnElement, and_, case, func, select
from sqlalchemy.orm import Session

from playbook import upkeep
from playbook.lessons import fields, ids
from playbook.models import STATUSES, Bullet, PullRequest, Revision, UsageEvent
from playbook.scopes import EVERYTHING
from playbook.search import ranking, search_scope
from playbook.search.floor import Floor, default_min_relevance
from playbook.search.relevance import fit_words
from playbook.search.retrieval import Retriever
from playbook.search.sync import LIVE, PROPOSED
from playbook.search.text import Ticket

SORTS = ("score", "loads", "cites", "confidence", "last_used", "newest")
PAGE_SIZE = 25
# A search shows at most this many lessons: past it, BM25 scores say little more.
SEARCH_DEPTH = 200
QUERY_CHARS = 200
TIMELINE_ROWS = 100


@dataclass(frozen=True)
class Filters:
    """What the lessons page was asked for, each value already checked."""

    q: str = ""
    status: str | None = None
    scope: str | None = None
    ticket: str | None = None
    sort: str = "score"
    page: int = 1

    @classmethod
    def parse(cls, args: dict[str, str]) -> Filters:
        """Filters from query-string values; FieldProblem names a bad one."""
        q = fields.bounded(args.get("q") or "", "q", QUERY_CHARS).strip()
        status = (args.get("status") or "").strip() or None
        if status is not None and status not in STATUSES:
            raise fields.FieldProblem("status", f"must be one of {', '.join(STATUSES)}")
        scope = fields.text(args.get("scope") or "", "scope", fields.SCOPE_CHARS) or None
        ticket = fields.text(args.get("ticket") or "", "ticket", fields.TICKET_KEY_CHARS) or None
        # "score" is the best match of a search; without one, the newest lessons come first.
        sort = (args.get("sort") or "").strip() or "score"
        if sort not in SORTS:
            raise fields.FieldProblem("sort", f"must be one of {', '.join(SORTS)}")
        raw_page = (args.get("page") or "1").strip()
        page = ids.number(raw_page, max_digits=6)  # ASCII digits only: a full-width 1 is no page 1
        if page is None or not 1 <= page <= 100_000:
            raise fields.FieldProblem("page", "must be a page number from 1")
        return cls(q, status, scope, ticket, sort, page)


@dataclass(frozen=True)
class Row:
    """One lesson of a page, with its search score when the page is a search."""

    bullet: Bullet
    confidence: float
    score: float | None = None
    # A search's estimate of fit in words ("possible fit: matched deadlock"), as `search
    # --explain` says it; None when the page is not a search.
    fit: str | None = None


@dataclass
class Page:
    """One page of lessons, how many match in all, and how the search was done."""

    rows: list[Row]
    total: int
    page: int
    pages: int
    # "index" when the retriever ranked them, "text" when demoted lessons were matched by words.
    matched_by: Literal["index", "text", "filter"] = "filter"
    notes: list[str] = field(default_factory=list)
    # Which scopes' lessons the page holds, by the rule every search door follows.
    searched: search_scope.Searched | None = None


def confidence_of(bullet: Bullet) -> float:
    """A lesson's confidence, as the bot ranks with it."""
    return ranking.confidence(bullet.cites_success, bullet.cites_failure)


def _last_used_sql() -> ColumnElement[Any]:
    # greatest() skips NULLs on PostgreSQL but SQLite's max() does not: spell it out.
    loaded, cited = Bullet.last_loaded_at, Bullet.last_cited_at
    return case(
        (cited.is_(None), loaded),
        (loaded.is_(None), cited),
        (cited > loaded, cited),
        else_=loaded,
    )


def _order(sort: str) -> list[Any]:
    by_id = Bullet.id.asc()
    if sort == "loads":
        return [Bullet.loads.desc(), by_id]
    if sort == "cites":
        return [Bullet.cites.desc(), by_id]
    if sort == "confidence":
        return [upkeep.confidence_column().desc(), Bullet.cites.desc(), by_id]
    if sort == "last_used":
        return [_last_used_sql().desc().nulls_last(), by_id]
    return [Bullet.created_at.desc(), Bullet.id.desc()]


def _searched(filters: Filters) -> search_scope.Searched:
    """The scopes the page holds: a scope chosen means it and global, as on every door."""
    # The page's ticket filter is where a lesson was learned, not a ticket searched for.
    return search_scope.searched_by(EVERYTHING, scope=filters.scope)


def _where(filters: Filters) -> list[ColumnElement[bool]]:
    where: list[ColumnElement[bool]] = []
    if filters.status:
        where.append(Bullet.status == filters.status)
    scopes = _searched(filters).scopes
    if scopes is not None:
        where.append(Bullet.scope.in_(scopes))
    if filters.ticket:
        where.append(Bullet.learned_from == filters.ticket)
    return where


def lessons(session: Session, filters: Filters, *, size: int = PAGE_SIZE) -> Page:
    """The page of lessons ``filters`` asks for.

    A query ranks active and proposed lessons with the bot's own retriever (BM25 with
    feedback), so the page shows what a ticket with that text would get. Deprecated,
    archived and superseded lessons are not in the search index: asked for by status, they
    are matched by their words instead, and the page says so.
    """
    if not filters.q:
        page = _filtered(session, filters, size)
    elif filters.status is not None and filters.status not in LIVE:
        page = _by_words(session, filters, size)
    else:
        page = _ranked(session, filters, size)
    page.searched = _searched(filters)
    return page


def _window(rows: list[Row], filters: Filters, size: int, **extra: Any) -> Page:
    """The page of an in-memory list of rows (a search's), the last one past the end."""
    pages = max((len(rows) + size - 1) // size, 1)
    page = min(filters.page, pages)
    return Page(rows[(page - 1) * size : page * size], len(rows), page, pages, **extra)


def _filtered(session: Session, filters: Filters, size: int) -> Page:
    where = _where(filters)
    total = session.scalar(select(func.count()).select_from(Bullet).where(*where)) or 0
    pages = max((total + size - 1) // size, 1)
    page = min(filters.page, pages)
    query = (
        select(Bullet)
        .where(*where)
        .order_by(*_order(filters.sort))
        .offset((page - 1) * size)
        .limit(size)
    )
    rows = [Row(bullet, confidence_of(bullet)) for bullet in session.scalars(query)]
    return Page(rows, total, page, pages)


def _by_words(session: Session, filters: Filters, size: int) -> Page:
    words = [word for word in filters.q.split() if word][:10]
    # Every word must appear; LIKE's wildcards in the words are taken literally.
    matches = [Bullet.text.ilike(f"%{_escape_like(word)}%", escape="\\") for word in words] or [
        Bullet.id.is_not(None)
    ]
    found = list(
        session.scalars(
            select(Bullet)
            .where(*_where(filters), and_(*matches))
            .order_by(*_order("newest" if filters.sort == "score" else filters.sort))
            .limit(SEARCH_DEPTH)
        )
    )
    rows = [Row(bullet, confidence_of(bullet)) for bullet in found]
    note = f"{filters.status} lessons are not in the search index; matched by their words"
    return _window(rows, filters, size, matched_by="text", notes=[note])


def _escape_like(word: str) -> str:
    return word.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def _ranked(session: Session, filters: Filters, size: int) -> Page:
    retriever = Retriever.shared(session)
    names = retriever.scope_names(session)
    active = {name for name in names if not name.startswith(PROPOSED)}
    proposed = {name for name in names if name.startswith(PROPOSED)}
    if filters.status == "active":
        scopes = active
    elif filters.status == "proposed":
        scopes = proposed
    else:
        scopes = active | proposed
    wanted = _searched(filters).scopes
    if wanted is not None:
        scopes = {name for name in scopes if name.removeprefix(PROPOSED) in wanted}
    result = retriever.search(
        session, Ticket.from_text(filters.q), k=SEARCH_DEPTH, scopes=scopes, consumer="ui"
    )
    scores = {hit.bullet_id: hit.score for hit in result.hits}
    lesson_floor = Floor.of(default_min_relevance()).lesson
    fits = {
        hit.bullet_id: fit_words(hit.relevance or 0.0, hit.matched, lesson_floor)
        for hit in result.hits
    }
    bullets = {
        bullet.id: bullet
        for bullet in session.scalars(select(Bullet).where(Bullet.id.in_(list(scores))))
    }
    rows = [
        Row(bullets[key], confidence_of(bullets[key]), score, fits.get(key))
        for key, score in scores.items()
        if key in bullets and (not filters.ticket or bullets[key].learned_from == filters.ticket)
    ]
    return _window(_sorted(rows, filters.sort), filters, size, matched_by="index")


def _sorted(rows: list[Row], sort: str) -> list[Row]:
    if sort == "score":
        return rows  # the retriever's order
    keys = {
        "loads": lambda row: row.bullet.loads,
        "cites": lambda row: row.bullet.cites,
        "confidence": lambda row: row.confidence,
        "last_used": lambda row: max(
            (t.timestamp() for t in (row.bullet.last_loaded_at, row.bullet.last_cited_at) if t),
            default=float("-inf"),
        ),
        "newest": lambda row: row.bullet.created_at.timestamp(),
    }
    return sorted(rows, key=keys[sort], reverse=True)


@dataclass(frozen=True)
class Diff:
    """What one revision changed: a field, its old and new value, and for text the words."""

    field: str
    before: Any
    after: Any
    # For the text: (op, words) runs, op being "same", "del" or "ins".
    words: list[tuple[str, str]] | None = None


def changes(revision: Revision) -> list[Diff]:
    """The fields a revision changed, with a word diff of the text."""
    before, after = revision.before or {}, revision.after or {}
    diffs = []
    for key in sorted(set(before) | set(after), key=_field_order):
        old, new = before.get(key), after.get(key)
        if old == new:
            continue
        words = word_diff(str(old or ""), str(new or "")) if key == "text" else None
        diffs.append(Diff(key, old, new, words))
    return diffs


def _field_order(key: str) -> tuple[int, str]:
    first = ("text", "status", "demoted_reason", "demoted_on", "scope", "learned_from", "tags")
    return (first.index(key) if key in first else len(first), key)


def word_diff(old: str, new: str) -> list[tuple[str, str]]:
    """Runs of words kept, deleted and inserted between two texts."""
    a, b = old.split(" "), new.split(" ")
    runs: list[tuple[str, str]] = []
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if op == "equal":
            runs.append(("same", " ".join(a[i1:i2])))
            continue
        if i2 > i1:
            runs.append(("del", " ".join(a[i1:i2])))
        if j2 > j1:
            runs.append(("ins", " ".join(b[j1:j2])))
    return runs


@dataclass(frozen=True)
class Moment:
    """One line of a lesson's timeline: a load, a cite (and its outcome) or a change."""

    at: datetime
    kind: str  # loaded, cited, merged, rejected, or a revision action
    actor: str | None
    ticket: str | None = None
    pull_request: str | None = None
    reason: str | None = None


def timeline(session: Session, bullet_id: str, *, limit: int = TIMELINE_ROWS) -> list[Moment]:
    """The newest loads, cites and changes of a lesson, newest first."""
    events = list(
        session.scalars(
            select(UsageEvent)
            .where(UsageEvent.bullet_id == bullet_id)
            .order_by(UsageEvent.ts.desc(), UsageEvent.id.desc())
            .limit(limit)
        )
    )
    # A cite in a merged PR the team reverted is a failure: the line says which revert.
    pr_keys = {event.pr_key for event in events if event.pr_key}
    reverted: dict[str, str | None] = {}
    if pr_keys:
        for pr_key, revert in session.execute(
            select(PullRequest.key, PullRequest.reverted_by).where(
                PullRequest.key.in_(pr_keys), PullRequest.reverted_by.is_not(None)
            )
        ):
            reverted[pr_key] = revert
    moments = [
        Moment(
            event.ts,
            _usage_kind(event),
            event.consumer,
            event.ticket_key,
            event.pr_key,
            reason=(
                f"{event.pr_key} was reverted by {reverted[event.pr_key]}"
                if event.pr_key in reverted and event.kind == "cited"
                else None
            ),
        )
        for event in events
    ]
    revisions = session.scalars(
        select(Revision)
        .where(Revision.bullet_id == bullet_id)
        .order_by(Revision.at.desc(), Revision.id.desc())
        .limit(limit)
    )
    moments += [
        Moment(
            revision.at,
            _ACTIONS.get(revision.action, revision.action),
            revision.actor,
            reason=revision.reason,
        )
        for revision in revisions
    ]
    moments.sort(key=lambda moment: moment.at, reverse=True)
    return moments[:limit]


_ACTIONS = {
    "create": "created",
    "approve": "approved",
    "deprecate": "deprecated",
    "archive": "archived",
    "restore": "restored",
    "supersede": "superseded",
    "replace": "replaced",
    "edit": "edited",
    "revert": "reverted",
}


def _usage_kind(event: UsageEvent) -> str:
    if event.kind != "cited" or event.success is None:
        return event.kind
    return "merged" if event.success else "rejected"


def revisions(session: Session, bullet_id: str, *, limit: int = TIMELINE_ROWS) -> list[Revision]:
    """A lesson's newest revisions, newest first."""
    return list(
        session.scalars(
            select(Revision)
            .where(Revision.bullet_id == bullet_id)
            .order_by(Revision.id.desc())
            .limit(limit)
        )
    )


def proposals(session: Session, *, limit: int = 200) -> list[Bullet]:
    """Proposed lessons waiting for a maintainer, oldest first."""
    return list(
        session.scalars(
            select(Bullet)
            .where(Bullet.status == "proposed")
            .order_by(Bullet.created_at, Bullet.id)
            .limit(limit)
        )
    )


def proposal_count(session: Session) -> int:
    """How many lessons wait for approval."""
    return (
        session.scalar(select(func.count()).select_from(Bullet).where(Bullet.status == "proposed"))
        or 0
    )


def scopes(session: Session) -> list[str]:
    """Every scope a lesson is in, for the scope filter."""
    return list(session.scalars(select(Bullet.scope).distinct().order_by(Bullet.scope)))


__all__ = [
    "SORTS",
    "Diff",
    "Filters",
    "Moment",
    "Page",
    "Row",
    "changes",
    "lessons",
    "proposal_count",
    "proposals",
    "revisions",
    "scopes",
    "timeline",
    "word_diff",
]

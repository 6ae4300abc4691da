"""A repository's history replayed through the playbook: lessons anchored, flagged, searched.

Events in time order on two fresh SQLite playbooks, the clock at each event's time:

- a commit first flags, through `playbook.anchors.stale.flag` (the bot's merged-PR path), the
  active lessons anchored to the files it modified, renamed or deleted; then, when it names a
  ticket that has no lesson yet, makes that ticket's lesson, anchored by `history.capture`;
- a ticket of the dataset fixed by a later commit is searched when it is created, with the
  product's `Retriever.search`, in the playbook with anchors and in one without them;
- at each week's turn a maintainer looks: every flagged lesson is listed (`stale.flagged`)
  and cleared (`stale.clear`), so a week's list is what the team sees that week.

A lesson's text is its ticket's summary when the dataset has the ticket; lessons of tickets it
lacks are kept in a scope of their own (`UNTEXTED`), flagged like the rest but never searched,
so a placeholder text cannot take part in a ranking.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from dup_recall import scratch_playbook
from history import AnchorIndex, Busy, Commit, capture
from sqlalchemy.orm import Session

from playbook import clock
from playbook.anchors import stale
from playbook.anchors.detail import files_gone
from playbook.lessons import bulk, secrets
from playbook.search.retrieval import Retriever
from playbook.search.text import Ticket

K = 10
ACTOR = "anchor_history"
UNTEXTED = ":untexted"  # the scope suffix of lessons whose ticket text the dataset lacks


@dataclass
class Lesson:
    """A lesson the replay made: its ticket, when, which branch of the rule, its anchors."""

    key: str
    at: datetime
    kind: str
    anchors: list[str]
    texted: bool


@dataclass(frozen=True)
class FlagEvent:
    """One lesson flagged by one commit."""

    at: datetime
    lesson: str
    commit: str
    same_ticket: bool  # the commit names the lesson's own ticket (a follow-up, a backport)
    gone: bool  # every file the lesson is about is gone
    followed: bool  # a rename rewrote its anchors


@dataclass(frozen=True)
class Week:
    """What a maintainer's weekly look found: flagged lessons listed, and those all gone."""

    start: datetime
    listed: int
    gone: int


@dataclass(frozen=True)
class Searched:
    """One ticket searched at its creation: the ranks of the right lessons, with and without."""

    key: str
    right: int  # earlier lessons anchored to a file the ticket's fix touched (or its folder)
    with_anchors: int | None  # rank of the first right lesson (None: not in the top K)
    without: int | None
    anchored_hits: int  # hits the anchors raised (the ticket names what they are about)
    anchored_right: int  # of those, right ones
    # The same for the strict sense: lessons anchored to one of the fix's files by name.
    right_files: int = 0
    files_with_anchors: int | None = None
    files_without: int | None = None
    anchored_right_files: int = 0


@dataclass
class Replay:
    """Everything the replay saw, for the measures."""

    lessons: dict[str, Lesson] = field(default_factory=dict)
    flags: list[FlagEvent] = field(default_factory=list)
    weeks: list[Week] = field(default_factory=list)
    searched: list[Searched] = field(default_factory=list)
    refused: int = 0  # lessons the playbook refused (a credential in the text)
    anchors: dict[str, list[str]] = field(default_factory=dict)  # at the end
    busy: Busy | None = None  # the busy files left out of anchors (None: the rule as written)


def week_of(at: datetime) -> datetime:
    """The Monday 00:00 UTC starting ``at``'s week."""
    day = clock.to_utc(at).replace(hour=0, minute=0, second=0, microsecond=0)
    return day - timedelta(days=day.weekday())


def fixes(commits: list[Commit]) -> dict[str, set[str]]:
    """Each ticket key: every path the commits naming it touched."""
    out: dict[str, set[str]] = {}
    for c in commits:
        for key in c.keys:
            out.setdefault(key, set()).update(c.paths())
    return out


@contextmanager
def playbooks() -> Iterator[tuple[Session, Session]]:
    """Two fresh playbooks: lessons with anchors, and the same lessons without."""
    with scratch_playbook("anchored") as anchored, scratch_playbook("plain") as plain:
        first, second = Session(anchored), Session(plain)
        try:
            yield first, second
        finally:
            first.close()
            second.close()


def replay(
    commits: list[Commit],
    tickets: dict[str, dict[str, Any]],
    source: str,
    project: str,
    *,
    quiet: bool = True,
    progress: bool = False,
) -> Replay:
    """Replay ``commits`` (oldest first), searching each of ``tickets`` a later commit fixes.

    ``tickets`` are the dataset's rows of ``project`` by key; ``source`` names the
    repository in each flag's detail (`apache/zookeeper@<commit>`). With ``quiet``, the
    busy files (`history.Busy`) are no lesson's anchors; else the rule as written.
    """
    fixed = fixes(commits)
    events: list[tuple[datetime, int, str, Any]] = [(c.at, 1, "commit", c) for c in commits]
    for key, row in tickets.items():
        if key in fixed and row.get("created"):
            events.append((clock.parse_time(row["created"]), 0, "ticket", key))
    events.sort(key=lambda e: (e[0], e[1], e[3] if e[2] == "ticket" else e[3].sha))
    run = Replay(busy=Busy() if quiet else None)
    index = AnchorIndex()
    scopes = (project, project + UNTEXTED)
    with_anchors, without = Retriever(), Retriever()
    week: datetime | None = None
    with playbooks() as (session, plain):
        for i, (at, _, kind, item) in enumerate(events):
            if progress and i % 500 == 499:
                print(f"  {i + 1:,} of {len(events):,} events, {at:%Y-%m-%d}", file=sys.stderr)
            clock.set_clock(lambda at=at: at)
            if week is not None and week_of(at) != week:
                run.weeks.append(weekly_look(session, week))
            week = week_of(at)
            if kind == "ticket":
                if item in run.lessons:
                    continue  # its fix landed before the ticket was filed: nothing to ask
                known = texted(run)
                right = index.lessons_touching(fixed[item]) & known
                by_name = index.lessons_named(fixed[item]) & known
                hits = search(with_anchors, session, tickets[item], project)
                plain_hits = search(without, plain, tickets[item], project)
                run.searched.append(ranked(item, right, by_name, hits, plain_hits))
            else:
                flag(session, run, index, item, source, scopes)
                session.commit()  # the flags stand whatever becomes of the lesson below
                learn(session, plain, run, index, item, tickets, project)
                if run.busy is not None:
                    run.busy.saw(item)
            session.commit()
            plain.commit()
        if week is not None:
            run.weeks.append(weekly_look(session, week))
        run.anchors = dict(index.anchors)
    return run


def texted(run: Replay) -> set[str]:
    """The lessons the search can see (their ticket's text is known)."""
    return {key for key, lesson in run.lessons.items() if lesson.texted}


def flag(
    session: Session,
    run: Replay,
    index: AnchorIndex,
    commit: Commit,
    source: str,
    scopes: tuple[str, ...],
) -> None:
    """The commit's flags, through the bot's own `stale.flag`, one call per scope.

    Only the changes an anchor can match are passed on (exact for `capture`'s shapes):
    `flag` reads every change against every lesson, which over 18 years of commits is slow
    for no difference.
    """
    changes = list(commit.changes)
    if index.exact:
        changes = [c for c in changes if index.touching(c.previous or c.path)]
        if not changes:
            return
    for scope in scopes:
        for done in stale.flag(session, scope, f"{source}@{commit.sha}", changes, actor=ACTOR):
            followed = done.paths != index.anchors.get(done.bullet_id)
            index.put(done.bullet_id, done.paths)
            run.flags.append(
                FlagEvent(
                    at=commit.at,
                    lesson=done.bullet_id,
                    commit=commit.sha,
                    same_ticket=done.bullet_id in commit.keys,
                    gone=files_gone(done.detail) is not None,
                    followed=followed,
                )
            )


def learn(
    session: Session,
    plain: Session,
    run: Replay,
    index: AnchorIndex,
    commit: Commit,
    tickets: dict[str, dict[str, Any]],
    project: str,
) -> None:
    """The lesson of the commit's first ticket, if it has none yet, anchored to the change."""
    if not commit.keys or commit.keys[0] in run.lessons:
        return
    key = commit.keys[0]
    busy = run.busy.files() if run.busy is not None else set()
    kind, anchors = capture(commit.changes, busy)
    if run.busy is not None:
        run.busy.left_out.update(busy & {change.path for change in commit.changes})
    row = tickets.get(key)
    summary = (row or {}).get("summary") or ""
    values = {
        "id": key,
        "text": summary or f"The lesson learned from {key}.",
        "scope": project if summary else project + UNTEXTED,
        "learned_from": key,
        "section": "error_resolution",
        "source": ACTOR,
        "status": "active",
        "tags": (row or {}).get("components") or [],
        "paths": anchors or None,
    }
    try:
        bulk.put(session, values, actor=ACTOR)
        if summary:
            bulk.put(plain, {**values, "paths": None}, actor=ACTOR)
    except secrets.HoldsCredential:
        run.refused += 1
        session.rollback()
        plain.rollback()
        return
    run.lessons[key] = Lesson(key, commit.at, kind, anchors, bool(summary))
    if anchors:
        index.put(key, anchors)


def weekly_look(session: Session, week: datetime) -> Week:
    """The week's list of flagged lessons, each cleared once seen."""
    listed = stale.flagged(session, limit=100_000)
    for lesson in listed:
        stale.clear(session, lesson["id"], actor="maintainer", reason="looked at this week")
    session.commit()
    return Week(week, len(listed), sum(1 for lesson in listed if lesson["files_gone"]))


def search(retriever: Retriever, session: Session, row: dict[str, Any], project: str) -> list[Any]:
    """The product's search for the ticket (default ranking, k = K), in its project."""
    question = Ticket(
        key=row["key"],
        summary=row.get("summary") or "",
        description=row.get("description"),
        labels=tuple((row.get("labels") or []) + (row.get("components") or [])),
        scope=project,
    )
    return list(retriever.search(session, question, k=K).hits)


def ranked(
    key: str, right: set[str], by_name: set[str], hits: list[Any], plain_hits: list[Any]
) -> Searched:
    """Where the first right lesson ranked in each playbook, and what the anchors raised.

    ``right``: lessons anchored to a file the fix touched or to its folder; ``by_name``: those
    anchored to one of the files by name.
    """
    raised = [hit for hit in hits if hit.anchor is not None]
    return Searched(
        key=key,
        right=len(right),
        with_anchors=first_rank(right, hits),
        without=first_rank(right, plain_hits),
        anchored_hits=len(raised),
        anchored_right=sum(1 for hit in raised if hit.bullet_id in right),
        right_files=len(by_name),
        files_with_anchors=first_rank(by_name, hits),
        files_without=first_rank(by_name, plain_hits),
        anchored_right_files=sum(1 for hit in raised if hit.bullet_id in by_name),
    )


def first_rank(right: set[str], hits: list[Any]) -> int | None:
    """The rank of the first hit in ``right`` (1-based), or None."""
    return next((hit.rank for hit in hits if hit.bullet_id in right), None)

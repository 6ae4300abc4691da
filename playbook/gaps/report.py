"""The playbook's gaps: recent tickets no lesson fitted, grouped by what they are about.

A ticket is recent when its first search falls within the last ``days``. It had no lesson
when none of its searches showed one (the bot's comment shows every lesson retrieval returns
for the ticket, so "no lesson" and "none good enough for the comment" are the same tickets)
and, for a ticket the holdout experiment held out, when no lesson would have been shown
either: a held-out ticket with would-be lessons is covered, it just did not see them.
A group of at least ``minimum`` such tickets is a gap, where writing a lesson would pay most.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import String, and_, case, cast, func, select
from sqlalchemy.orm import Session

from playbook.errors import InvalidInput
from playbook.experiment.assignment import canonical
from playbook.gaps import grouping
from playbook.lessons import secrets
from playbook.models import ExperimentExposure, Retrieval
from playbook.scopes import View
from playbook.search.text import tokenize

DAYS = 7
MINIMUM = 3
MAX_DAYS = 366
# The newest tickets of the window looked at, at most: grouping takes about half a second per
# thousand tickets (bench/gaps.py) and the whole report on 5,000 about 3 s on SQLite, and a week
# with more than this is not waiting for a report.
MAX_TICKETS = 5_000


@dataclass(frozen=True)
class GapTicket:
    """One ticket of a gap: its key, summary and when the bot first searched for it."""

    key: str
    title: str
    first_seen: datetime


@dataclass(frozen=True)
class Gap:
    """Tickets about the same thing that no lesson fitted, newest last, with telling words."""

    tickets: list[GapTicket]
    words: list[str]
    first_seen: datetime
    last_seen: datetime
    per_week: float  # tickets a week between the first and the last (over a week at least)

    @property
    def size(self) -> int:
        """How many tickets the gap has."""
        return len(self.tickets)


@dataclass(frozen=True)
class Report:
    """The gaps of a window, largest then most recent first, and what they were drawn from."""

    days: int
    minimum: int
    since: datetime
    threshold: float
    tickets: int  # recent tickets searched for, in the scope (of the newest MAX_TICKETS)
    without_lessons: int  # of those, the ones no lesson fitted
    capped: bool  # more recent tickets than MAX_TICKETS: the oldest were left out
    gaps: list[Gap]


def check(days: int, minimum: int) -> None:
    """InvalidInput naming the value when ``days`` or ``minimum`` is out of range."""
    if not 1 <= days <= MAX_DAYS:
        raise InvalidInput(f"days must be from 1 to {MAX_DAYS}")
    if minimum < 2:
        raise InvalidInput("min must be at least 2: a gap is a problem that recurs")


def find(
    session: Session,
    *,
    now: datetime,
    days: int = DAYS,
    minimum: int = MINIMUM,
    scope: str | None = None,
    threshold: float = grouping.THRESHOLD,
) -> Report:
    """The groups of at least ``minimum`` recent tickets without a lesson (see the module).

    ``scope`` (a repository or Jira project) keeps only its tickets, as an agent bound to it
    sees. Every recent ticket still teaches the weights (how common each word is): a scope's
    few tickets alone cannot tell a template's words from the words of its recurring problem,
    and weights show nothing of another scope's tickets.
    """
    check(days, minimum)
    since = now - timedelta(days=days)
    view = View(scope=scope)
    recent = _recent(session, since)
    capped = len(recent) > MAX_TICKETS
    recent = recent[:MAX_TICKETS]
    texts = _texts(session, since, {key for key, *_ in recent})
    held = _held_with_lessons(session, [key for key, _, covered in recent if not covered])
    open_tickets: list[tuple[grouping.Document, datetime]] = []
    reference: list[grouping.Document] = []
    counted = 0
    for key, first, covered in recent:
        mine = view.sees_ticket(key)
        counted += mine
        found = texts.get(key)
        if found is None:
            continue  # logged before searches kept their text: nothing to group it by
        document = grouping.Document(key=key, title=found[0], text=found[1])
        if covered or not mine or canonical(key) in held:
            reference.append(document)
        else:
            open_tickets.append((document, first))
    # Oldest first, then by key: the same tickets always give the same groups.
    open_tickets.sort(key=lambda item: (item[1], item[0].key))
    documents = [document for document, _ in open_tickets]
    grouped = grouping.group(documents, reference, threshold)
    gaps = []
    for positions, words in zip(grouped.groups, grouped.words, strict=True):
        if len(positions) < minimum:
            continue
        members = [
            GapTicket(
                key=open_tickets[p][0].key,
                # The reporter's text: no control or direction character reaches a terminal
                # or a page from here, whichever door shows it, and no credential (masked
                # in the visible text, so a token split by an invisible character too).
                title=secrets.masked(open_tickets[p][0].title),
                first_seen=open_tickets[p][1],
            )
            for p in positions
        ]
        shown = _shown_words(words, [open_tickets[p][0] for p in positions])
        first, last = members[0].first_seen, members[-1].first_seen
        weeks = max((last - first) / timedelta(weeks=1), 1.0)
        gaps.append(Gap(members, shown, first, last, per_week=round(len(members) / weeks, 2)))
    gaps.sort(key=lambda gap: (-gap.size, -gap.last_seen.timestamp(), gap.tickets[0].key))
    return Report(
        days=days,
        minimum=minimum,
        since=since,
        threshold=threshold,
        tickets=counted,
        without_lessons=len(documents),
        capped=capped,
        gaps=gaps,
    )


def _shown_words(words: list[str], documents: list[grouping.Document]) -> list[str]:
    """The telling ``words`` that are words of the group's text as masked (`secrets.masked`):
    a token pasted in several tickets is a word they share, and no part of it is shown.

    Masked after grouping, and only the gaps' tickets: masking every recent ticket would
    scan thousands of texts for the few that are shown.
    """
    if not words:
        return words
    said: set[str] = set()
    for document in documents:
        said.update(tokenize(secrets.masked(f"{document.title}\n{document.text}")))
    return [word for word in words if set(tokenize(word)) <= said]


def _recent(session: Session, since: datetime) -> list[tuple[str, datetime, bool]]:
    """(key, first search, whether a search showed a lesson) of the newest recent tickets."""
    # JSON functions differ between SQLite and PostgreSQL, but the stored text does not: a
    # list holding at least one id has a quote in it, while "[]" and "null" have none.
    shown = cast(Retrieval.bullet_ids, String).contains('"')
    first = func.min(Retrieval.at)
    rows = session.execute(
        select(Retrieval.ticket_key, first, func.max(case((shown, 1), else_=0)))
        .where(Retrieval.ticket_key.is_not(None))
        .group_by(Retrieval.ticket_key)
        .having(first >= since)
        .order_by(first.desc(), Retrieval.ticket_key)
        .limit(MAX_TICKETS + 1)  # one more says whether any was left out
    )
    return [(key, at, bool(covered)) for key, at, covered in rows]


def _texts(session: Session, since: datetime, keys: set[str]) -> dict[str, tuple[str, str]]:
    """Each ticket's latest (summary, searched text), from its searches in the window."""
    columns = (Retrieval.id, Retrieval.at, Retrieval.ticket_key, Retrieval.title, Retrieval.text)
    rows: list[tuple[int, datetime, str, str | None, str]] = []
    for chunk in _slices(sorted(keys)):
        found = select(*columns).where(
            Retrieval.ticket_key.in_(chunk), Retrieval.at >= since, Retrieval.text.is_not(None)
        )
        rows.extend(tuple(row) for row in session.execute(found))
    rows.sort(key=lambda row: (row[1], row[0]))
    texts: dict[str, str] = {}
    titles: dict[str, str] = {}
    # Later rows overwrite earlier ones: an edited ticket is grouped by what it says now. An
    # agent's search keeps the text it searched but no title (it is not the ticket's summary).
    for _, _, key, title, text in rows:
        texts[key] = text
        if title is not None:
            titles[key] = title
    return {key: (titles.get(key) or text.partition("\n")[0], text) for key, text in texts.items()}


def _held_with_lessons(session: Session, keys: list[str]) -> set[str]:
    """The tickets among ``keys`` (canonical spelling) held out from lessons that would fit."""
    held: set[str] = set()
    for chunk in _slices(sorted({canonical(key) for key in keys})):
        held.update(
            session.scalars(
                select(ExperimentExposure.ticket_key)
                .where(
                    and_(
                        ExperimentExposure.arm == "held_out",
                        ExperimentExposure.ticket_key.in_(chunk),
                    )
                )
                .distinct()
            )
        )
    return held


def as_dict(report: Report, link: Callable[[str], str | None]) -> dict[str, Any]:
    """The report as JSON-ready values, tickets linked by ``link(key)``: the CLI and API shape."""
    return {
        "days": report.days,
        "min": report.minimum,
        "since": report.since,
        "threshold": report.threshold,
        "tickets": report.tickets,
        "without_lessons": report.without_lessons,
        "capped": report.capped,
        "gaps": [
            {
                "size": gap.size,
                "words": gap.words,
                "first_seen": gap.first_seen,
                "last_seen": gap.last_seen,
                "per_week": gap.per_week,
                "tickets": [
                    {
                        "key": ticket.key,
                        "title": ticket.title,
                        "url": link(ticket.key),
                        "first_seen": ticket.first_seen,
                    }
                    for ticket in gap.tickets
                ],
            }
            for gap in report.gaps
        ],
    }


def _slices(values: list[str], size: int = 500) -> list[list[str]]:
    """``values`` in slices: a list of bound values has a limit on every database."""
    return [values[start : start + size] for start in range(0, len(values), size)]

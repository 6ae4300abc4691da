"""What the estimate learned from people's verdicts, per scope, and the lessons they call off-topic.

A lesson is listed as off-topic when people often say it did not fit the ticket it was shown
on: at least OFF_TOPIC_UNHELPFUL unhelpful verdicts, from at least OFF_TOPIC_PEOPLE people on
at least OFF_TOPIC_TICKETS tickets, and at least OFF_TOPIC_SHARE of its verdicts unhelpful.
Several people and tickets, so one person's habit or one pile of 👎 on one comment does not
list a lesson; a share, so a lesson that helps as often as it misses is not listed. The list
is for a maintainer to read (retag the lesson, narrow its text, move its scope): nothing here
changes a lesson. A verdict is one person's on one lesson for one ticket; a reply about the
lesson counts over the same person's reaction to the comment.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from playbook.fit.calibration import MAX_SHIFT, MIN_LABELS, LabelRow, evidence
from playbook.fit.labels import COMMAND
from playbook.models import Bullet, FitCalibration, FitLabel
from playbook.scopes import EVERYTHING, View
from playbook.search.floor import default_min_relevance
from playbook.search.relevance import shifted

OFF_TOPIC_UNHELPFUL = 3
OFF_TOPIC_PEOPLE = 2
OFF_TOPIC_TICKETS = 2
OFF_TOPIC_SHARE = 2 / 3
# The most lessons listed per scope (and overall), most unhelpful verdicts first.
OFF_TOPIC_ROWS = 20
TEXT_HEAD_CHARS = 80
# The longest scope name asked for (`fields.SCOPE_CHARS`).
SCOPE_CHARS = 200


@dataclass(frozen=True)
class OffTopic:
    """A lesson people often mark as not fitting the tickets it is shown on."""

    bullet_id: str
    text: str  # the start of the lesson's text, one line
    unhelpful: int
    helpful: int
    people: int  # who said it did not fit
    tickets: int  # where they said it
    last_reason: str | None  # the newest reason given in a reply, if any
    last_at: datetime


@dataclass(frozen=True)
class ScopeFit:
    """What one scope's verdicts taught the estimate."""

    scope: str
    labels: int  # every verdict recorded in the scope
    helpful: int
    unhelpful: int
    used: int  # those the fit reads: with the estimate the bot showed
    shift: float | None  # added to the estimate's log-odds; None: the packaged model as is
    fitted_at: datetime | None
    needed: int  # more verdicts with an estimate before the scope is fitted (0: fitted)
    floor: float  # the comment floor in force
    raw_floor: float  # the packaged estimate a ticket needs here to reach it
    off_topic: list[OffTopic] = field(default_factory=list)

    @property
    def at_bound(self) -> bool:
        """True when the verdicts would move the estimate further than allowed."""
        return self.shift is not None and abs(self.shift) >= MAX_SHIFT - 1e-9

    def in_words(self) -> str:
        """The shift as a maintainer reads it."""
        if self.shift is None:
            return (
                f"the packaged model as is: {self.used} of {MIN_LABELS} verdicts on lessons the "
                f"bot showed, {self.needed} more to go"
            )
        if abs(self.shift) < 0.01:
            return "fitted: the packaged model's level fits this scope (no shift)"
        way = "higher" if self.shift > 0 else "lower"
        bound = " (at the bound)" if self.at_bound else ""
        return (
            f"fitted on {self.used} verdicts: estimates read {math.exp(abs(self.shift)):.2g}x "
            f"{way} in odds (log-odds {self.shift:+.2f}){bound}"
        )


def comment_floor(min_relevance: float | None) -> float:
    """The comment floor in force: the configured one, else the packaged model's."""
    return float(min_relevance) if min_relevance is not None else default_min_relevance()


def raw_floor(floor: float, shift: float | None) -> float:
    """The packaged estimate that reaches ``floor`` once the scope's shift is added."""
    return shifted(floor, -shift) if shift else floor


def _visible_labels(session: Session, view: View, scope: str | None) -> list[FitLabel]:
    query = select(FitLabel).order_by(FitLabel.at, FitLabel.id)
    if view.scope is not None:
        # A scoped caller reads only its own scope's verdicts, whatever it asks for.
        query = query.where(FitLabel.scope == view.scope)
    if scope is not None:
        query = query.where(FitLabel.scope == scope)
    return list(session.scalars(query))


def off_topic(
    session: Session,
    view: View = EVERYTHING,
    scope: str | None = None,
    limit: int = OFF_TOPIC_ROWS,
) -> list[OffTopic]:
    """The off-topic lessons by the verdicts of ``scope`` (None: every scope the view reads)."""
    return _off_topic(session, view, _visible_labels(session, view, scope), limit)


def _off_topic(session: Session, view: View, rows: list[FitLabel], limit: int) -> list[OffTopic]:
    # One verdict per person, lesson and ticket: the reply when there is one (rows are oldest
    # first, so a later row of the same source replaces an earlier one).
    verdicts: dict[tuple[str, str, str], FitLabel] = {}
    for row in rows:
        key = (row.bullet_id, row.ticket_key, row.actor)
        held = verdicts.get(key)
        if held is None or row.source == COMMAND or held.source != COMMAND:
            verdicts[key] = row
    by_lesson: dict[str, list[FitLabel]] = defaultdict(list)
    for (bullet_id, _, _), row in verdicts.items():
        by_lesson[bullet_id].append(row)
    listed = []
    for bullet_id, said in by_lesson.items():
        misses = [r for r in said if not r.helpful]
        if (
            len(misses) < OFF_TOPIC_UNHELPFUL
            or len({r.actor for r in misses}) < OFF_TOPIC_PEOPLE
            or len({r.ticket_key for r in misses}) < OFF_TOPIC_TICKETS
            or len(misses) < OFF_TOPIC_SHARE * len(said)
        ):
            continue
        reasons = [r for r in misses if r.reason]
        listed.append(
            (
                bullet_id,
                len(misses),
                len(said) - len(misses),
                len({r.actor for r in misses}),
                len({r.ticket_key for r in misses}),
                max(reasons, key=lambda r: (r.at, r.id)).reason if reasons else None,
                max(r.at for r in misses),
            )
        )
    if not listed:
        return []
    texts = dict(
        session.execute(
            select(Bullet.id, Bullet.text).where(
                Bullet.id.in_([row[0] for row in listed]), view.lessons()
            )
        ).all()
    )
    rows_out = [
        OffTopic(bullet_id, _head(texts[bullet_id]), *counts)
        for bullet_id, *counts in listed
        if bullet_id in texts  # a lesson the caller may not read is not named
    ]
    rows_out.sort(
        key=lambda o: (-o.unhelpful, -o.unhelpful / (o.unhelpful + o.helpful), o.bullet_id)
    )
    return rows_out[:limit]


def _head(text: str) -> str:
    line = " ".join(text.split())
    return line if len(line) <= TEXT_HEAD_CHARS else f"{line[: TEXT_HEAD_CHARS - 1]}…"


def scope_fits(
    session: Session,
    floor: float,
    view: View = EVERYTHING,
    scope: str | None = None,
    limit: int = OFF_TOPIC_ROWS,
) -> list[ScopeFit]:
    """Each scope with verdicts (or only ``scope``), by name, with its fit at ``floor``.

    A scope asked for that has no verdict yet is still answered: it is at the packaged model.
    """
    rows = _visible_labels(session, view, scope)
    by_scope: dict[str, list[FitLabel]] = defaultdict(list)
    for row in rows:
        by_scope[row.scope].append(row)
    if scope is not None and (view.scope is None or scope == view.scope):
        by_scope.setdefault(scope, [])
    calibrations = {
        c.scope: c
        for c in session.scalars(
            select(FitCalibration).where(FitCalibration.scope.in_(sorted(by_scope)))
        )
    }
    answer = []
    for name, said in sorted(by_scope.items()):
        used = evidence(
            LabelRow(r.ticket_key, r.bullet_id, r.actor, r.source, r.helpful, r.relevance)
            for r in said
        ).labels
        calibration = calibrations.get(name)
        shift = float(calibration.shift) if calibration is not None else None
        helpful = sum(1 for r in said if r.helpful)
        answer.append(
            ScopeFit(
                scope=name,
                labels=len(said),
                helpful=helpful,
                unhelpful=len(said) - helpful,
                used=used,
                shift=shift,
                fitted_at=calibration.fitted_at if calibration is not None else None,
                needed=0 if calibration is not None else max(0, MIN_LABELS - used),
                floor=floor,
                raw_floor=raw_floor(floor, shift),
                off_topic=_off_topic(session, view, said, limit),
            )
        )
    return answer


def as_dict(
    session: Session,
    floor: float,
    view: View = EVERYTHING,
    scope: str | None = None,
    limit: int = OFF_TOPIC_ROWS,
) -> dict[str, Any]:
    """The whole report as plain values (the CLI's --json and the API answer alike)."""
    fits = scope_fits(session, floor, view, scope, limit)
    return {
        "floor": floor,
        "min_labels": MIN_LABELS,
        "max_shift": MAX_SHIFT,
        "off_topic_rule": {
            "unhelpful": OFF_TOPIC_UNHELPFUL,
            "people": OFF_TOPIC_PEOPLE,
            "tickets": OFF_TOPIC_TICKETS,
            "share": round(OFF_TOPIC_SHARE, 4),
        },
        "scopes": [
            {
                **{k: v for k, v in asdict(fit).items() if k != "off_topic"},
                "fitted": fit.shift is not None,
                "at_bound": fit.at_bound,
                "words": fit.in_words(),
                "off_topic": [asdict(o) for o in fit.off_topic],
            }
            for fit in fits
        ],
        # Across the scopes answered: a lesson shown in several may miss a little in each.
        "off_topic": [asdict(o) for o in off_topic(session, view, scope, limit)],
    }

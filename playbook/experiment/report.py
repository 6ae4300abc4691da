"""The holdout's report: both arms from stored outcomes, and each lesson's measured effect.

Counting happens in SQL, one GROUP BY per question, never ticket by ticket in Python: the arms
in one pass over the window's tickets (their merge times and review rounds come back as one
list per arm, for the bootstrap and the mean), the lessons in one pass over the exposures
joined to their tickets. A ticket has an outcome when its linked pull requests settled it
(``merged`` or ``closed``, see ``outcomes``): a ticket whose PR is still open, or that has no
PR yet, counts as a ticket of its arm but in no merge rate.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, Float, Select, Text, case, cast, extract, func, select, true
from sqlalchemy.orm import Session

from playbook import clock
from playbook.experiment import assignment, statistics
from playbook.experiment.outcomes import FINAL
from playbook.experiment.statistics import ArmCounts
from playbook.models import Bullet, ExperimentAssignment, ExperimentExposure

A = ExperimentAssignment
E = ExperimentExposure
# How much of a lesson's text the report carries: enough to recognise it.
TEXT_CHARS = 200
_NO_COUNTS = ArmCounts(0, 0, 0)
# A minimum no lesson reaches: its numbers without a verdict.
_NEVER = 2**62


@dataclass(frozen=True)
class Measured:
    """Lessons whose effect the holdout measured with confidence, both sides over the minimum."""

    harmful: tuple[str, ...]  # most harmful first
    helpful: frozenset[str]
    # Every measured lesson's effect (as `lesson_effect` gives it), so a caller listing the
    # harmful ones does not compute the family again for each.
    effects: Mapping[str, dict[str, Any]] = field(default_factory=dict, compare=False)


def _window(since: datetime | None, until: datetime | None) -> ColumnElement[bool]:
    """Tickets assigned in [since, until); either bound may be open."""
    condition: ColumnElement[bool] = true()
    if since is not None:
        condition = condition & (A.assigned_at >= clock.to_utc(since))
    if until is not None:
        condition = condition & (A.assigned_at < clock.to_utc(until))
    return condition


def _with_outcome() -> Any:
    return func.sum(case((A.outcome.in_(FINAL), 1), else_=0))


def _merged() -> Any:
    return func.sum(case((A.outcome == "merged", 1), else_=0))


def _dialect(session: Session) -> str:
    return session.get_bind().dialect.name


def _merge_hours(session: Session) -> Any:
    """SQL: hours from the ticket's creation (else its assignment) to its first merge."""
    start = func.coalesce(A.created_at, A.assigned_at)
    if _dialect(session) == "postgresql":
        return cast(extract("epoch", A.merged_at - start) / 3600.0, Float)
    # SQLite keeps times as ISO text: julianday reads them, in days.
    return (func.julianday(A.merged_at) - func.julianday(start)) * 24.0


def _listed(session: Session, values: Any) -> Any:
    """SQL: a group's non-null values as one comma-separated text.

    One row per arm instead of one per merged ticket: building 100,000 result rows costs
    more than the query that finds them.
    """
    if _dialect(session) == "postgresql":
        return func.string_agg(cast(values, Text), ",")
    return func.group_concat(values, ",")


def _numbers(listed: str | None) -> list[float]:
    """The numbers of a ``_listed`` text (plain floats: numpy would cost every import of this
    module 0.1 s, and one list per arm is cheap either way)."""
    return [float(value) for value in listed.split(",")] if listed else []


def _arms(session: Session, window: ColumnElement[bool]) -> tuple[dict[str, ArmCounts], float]:
    """Each arm's counts and measures, and the held-out share the tickets were assigned at."""
    final = A.outcome.in_(FINAL)
    merged = (A.outcome == "merged") & A.merged_at.is_not(None)
    arms = dict.fromkeys(("shown", "held_out"), _NO_COUNTS)
    percents = tickets = 0
    for arm, n, with_outcome, merged_count, percent, hours, rounds in session.execute(
        select(
            A.arm,
            func.count(),
            _with_outcome(),
            _merged(),
            func.sum(A.percent),
            _listed(session, case((merged, _merge_hours(session)))),
            _listed(session, case((final, A.review_rounds))),
        )
        .where(window)
        .group_by(A.arm)
    ):
        tickets += int(n)
        percents += int(percent or 0)
        arms[arm] = ArmCounts(
            int(n),
            int(with_outcome or 0),
            int(merged_count or 0),
            # A ticket merged before the bot enrolled it (a link found late) took no time.
            [h if h > 0 else 0.0 for h in _numbers(hours)],
            [int(r) for r in _numbers(rounds)],
        )
    # Each ticket was held out with its own percent's chance: the expected share is their mean.
    return arms, percents / tickets / 100 if tickets else 0.0


def _lesson_counts(
    session: Session, condition: ColumnElement[bool], *, every_lesson: bool
) -> Select[Any]:
    """Per lesson and exposure arm: tickets, those with an outcome, merged (one GROUP BY)."""
    ticket: Any = A.ticket_key
    if every_lesson and _dialect(session) == "sqlite":
        # Over every lesson, SQLite would walk exposures in lesson order to skip the GROUP
        # BY's sort and look each ticket up at random (3 s at a million exposures); hiding
        # the assignments' key from its planner makes it walk tickets in key order, each
        # one's exposures next to it, and sort once (a third of that). For one lesson the
        # lesson's index is best. PostgreSQL hash-joins either way.
        ticket = A.ticket_key + ""
    return (
        select(E.bullet_id, E.arm, func.count(), _with_outcome(), _merged())
        .select_from(A)
        .join(E, E.ticket_key == ticket)
        .where(condition)
        .group_by(E.bullet_id, E.arm)
    )


def _sides(session: Session, query: Select[Any]) -> dict[str, dict[str, ArmCounts]]:
    """Each lesson's shown and held-out sides from a ``_lesson_counts`` query."""
    sides: dict[str, dict[str, ArmCounts]] = defaultdict(dict)
    for bullet_id, arm, n, with_outcome, merged in session.execute(query):
        sides[bullet_id][arm] = ArmCounts(int(n), int(with_outcome or 0), int(merged or 0))
    return sides


def _effects(
    session: Session, window: ColumnElement[bool], min_tickets: int
) -> dict[str, dict[str, Any]]:
    """The effect of every lesson with enough data on both sides (in the window)."""
    enough = {}
    for bullet_id, side in _sides(
        session, _lesson_counts(session, window, every_lesson=True)
    ).items():
        shown, held_out = side.get("shown", _NO_COUNTS), side.get("held_out", _NO_COUNTS)
        # Checked before any interval is computed: most lessons have too few tickets.
        if min(shown.with_outcome, held_out.with_outcome) >= min_tickets:
            enough[bullet_id] = (shown, held_out)
    found = statistics.lesson_effects(list(enough.values()), min_tickets)
    return dict(zip(enough, found, strict=True))


def _most_harmful_first(effects: dict[str, dict[str, Any]]) -> list[str]:
    """Lesson ids by the upper end of their interval, then the difference, then id."""
    return sorted(effects, key=lambda i: (effects[i]["ci"][1], effects[i]["difference"], i))


def _iso(value: datetime | None) -> str | None:
    return None if value is None else clock.to_utc(value).isoformat()


def _period(period: assignment.Period) -> dict[str, Any]:
    return {
        "id": period.id,
        "percent": period.percent,
        "started_at": _iso(period.started_at),
        "started_by": period.started_by,
        "stopped_at": _iso(period.stopped_at),
        "stopped_by": period.stopped_by,
    }


def build(
    session: Session,
    *,
    since: datetime | None = None,
    until: datetime | None = None,
    min_tickets: int = statistics.MIN_TICKETS,
    seed: int = 0,
    scopes: Collection[str] | None = None,
) -> dict[str, Any]:
    """The report on the tickets assigned in [since, until), JSON-ready (times as ISO text).

    ``experiment`` (the running period and every period), ``window``, then
    ``arms.compare``'s ``srm``, ``arms``, ``difference``, ``verdict`` and ``needed``;
    ``lessons``: each lesson with at least ``min_tickets`` tickets with an outcome on both
    sides (among the window's tickets), most harmful first; ``measured_harmful`` and
    ``measured_helpful``, their ids; ``min_tickets``. With ``scopes`` (a caller bound to
    scopes), only lessons of those scopes are listed; the arms count every ticket.
    """
    # scipy and statsmodels (over a second to import) serve only the whole report.
    from playbook.experiment import arms as both_arms

    window = _window(since, until)
    arms, share = _arms(session, window)
    periods = assignment.periods(session)
    running = assignment.running(session)
    expected = share
    if not expected:
        # No ticket yet: the split in force (or last run) is what the arms will be held to.
        last = running or (periods[-1] if periods else None)
        expected = last.percent / 100 if last is not None else 0.0
    # The chi-square needs a share strictly inside (0, 1); with no ticket it reads nothing.
    compared = both_arms.compare(arms["shown"], arms["held_out"], expected or 0.5, seed)
    compared["srm"]["expected_held_out_share"] = expected or None
    effects = _effects(session, window, min_tickets)
    bullets = {
        bullet_id: (text, scope)
        for bullet_id, text, scope in session.execute(
            select(Bullet.id, Bullet.text, Bullet.scope).where(Bullet.id.in_(list(effects)))
        )
    }
    if scopes is not None:
        allowed = set(scopes)
        bullets = {i: found for i, found in bullets.items() if found[1] in allowed}
    ordered = [i for i in _most_harmful_first(effects) if i in bullets]
    return {
        "experiment": {
            "running": None
            if running is None
            else {
                "percent": running.percent,
                "started_at": _iso(running.started_at),
                "started_by": running.started_by,
            },
            "periods": [_period(period) for period in periods],
        },
        "window": {"since": _iso(since), "until": _iso(until)},
        **compared,
        "lessons": [
            {
                "id": i,
                "text": bullets[i][0][:TEXT_CHARS],
                "scope": bullets[i][1],
                **effects[i],
            }
            for i in ordered
        ],
        "measured_harmful": [i for i in ordered if effects[i]["verdict"] == "measured harmful"],
        "measured_helpful": [i for i in ordered if effects[i]["verdict"] == "measured helpful"],
        "min_tickets": min_tickets,
    }


def lesson_effect(
    session: Session, bullet_id: str, *, min_tickets: int = statistics.MIN_TICKETS
) -> dict[str, Any]:
    """One lesson's measured effect over every experiment ticket: ``statistics.lesson_effects``'
    (``shown``, ``held_out``, ``difference``, ``ci``, ``p_value``, ``adjusted_p_value``,
    ``compared``, ``verdict``) with ``enough_data`` and ``min_tickets``; the verdict is "not
    enough data" until both sides reach the minimum, and otherwise the one ``measured`` and
    ``build`` (without a window) give it."""
    query = _lesson_counts(session, E.bullet_id == bullet_id, every_lesson=False)
    side = _sides(session, query).get(bullet_id, {})
    shown, held_out = side.get("shown", _NO_COUNTS), side.get("held_out", _NO_COUNTS)
    enough = min(shown.with_outcome, held_out.with_outcome) >= min_tickets
    # A verdict is corrected for every lesson compared with it, so a lesson with enough data
    # needs the whole family: the same GROUP BY over every lesson as ``measured`` (about what
    # ``build``'s lessons cost: ms at thousands of exposures, 0.2 to 0.5 s at a million). The
    # one lesson's own counts come first, from its index, and spare that for lessons without
    # enough data, the most of them.
    effect = _effects(session, true(), min_tickets).get(bullet_id) if enough else None
    if effect is None:
        # Outside the family, nothing was compared with it: its numbers, no verdict. (Only
        # possible with enough data if a pull request reopened between the two queries.)
        effect = statistics.lesson_effects([(shown, held_out)], min_tickets=_NEVER)[0]
        enough = False
    return {**effect, "enough_data": enough, "min_tickets": min_tickets}


def measured(session: Session, *, min_tickets: int = statistics.MIN_TICKETS) -> Measured:
    """The lessons measured harmful (most harmful first) and helpful over every experiment
    ticket: among the lessons with at least ``min_tickets`` tickets with an outcome on both
    sides, those whose whole 95% interval is below (above) zero and whose difference Holm's
    correction over all of them still rejects (``statistics.lesson_effects``)."""
    effects = _effects(session, true(), min_tickets)
    ordered = _most_harmful_first(effects)
    return Measured(
        harmful=tuple(i for i in ordered if effects[i]["verdict"] == "measured harmful"),
        helpful=frozenset(i for i in ordered if effects[i]["verdict"] == "measured helpful"),
        effects=effects,
    )

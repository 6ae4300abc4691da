"""Upkeep: the numbers that tell a team whether its playbook helps."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import ColumnElement, and_, case, func, literal, or_, select, true
from sqlalchemy.orm import Session

from playbook import clock
from playbook.anchors import digest as stale_digest
from playbook.fit import report as fit_report
from playbook.lessons import demotions, lifecycle
from playbook.models import Bullet, Rating, Retrieval, UsageEvent
from playbook.scopes import EVERYTHING, GLOBAL, View
from playbook.search import ranking
from playbook.search.retrieval import HELD_OUT

# The demoted_reason of a lesson the holdout measured as harmful.
MEASURED_HARMFUL = demotions.MEASURED_HARMFUL
# PLAYBOOK_EFFECT_MIN_TICKETS's default (the experiment's statistics.MIN_TICKETS).
EFFECT_MIN_TICKETS = 20


def _bullet_line(bullet: Bullet) -> dict[str, Any]:
    return {
        "id": bullet.id,
        "text": bullet.text,
        "status": bullet.status,
        "cites_success": bullet.cites_success,
        "cites_failure": bullet.cites_failure,
        "confidence": round(ranking.confidence(bullet.cites_success, bullet.cites_failure), 3),
    }


def confidence_column() -> ColumnElement[float]:
    """`ranking.confidence` of each bullet's counters, as SQL, for ordering in the database."""
    return (Bullet.cites_success + literal(ranking.PRIOR_SUCCESSES)) / (
        Bullet.cites_success
        + Bullet.cites_failure
        + literal(ranking.PRIOR_SUCCESSES + ranking.PRIOR_FAILURES)
    )


def cite_rate_pairs(session: Session, view: View = EVERYTHING) -> tuple[int, int]:
    """(lessons loaded on a ticket, those of them also cited on that ticket), as pairs.

    A pair counts once however often the lesson was shown or cited for the ticket, and a
    cite without a load on its ticket is not in either number, so the rate these make is
    at most 100% by construction.
    """
    # One pass over the log, grouped by pair: a correlated lookup per loaded pair took
    # half a minute on 130k events.
    pairs = (
        select(
            func.max(case((UsageEvent.kind == "loaded", 1), else_=0)).label("loaded"),
            func.max(case((UsageEvent.kind == "cited", 1), else_=0)).label("cited"),
        )
        .where(UsageEvent.ticket_key.is_not(None), UsageEvent.counted, view.events())
        .group_by(UsageEvent.ticket_key, UsageEvent.bullet_id)
        .subquery()
    )
    shown, used = session.execute(
        select(func.count(), func.coalesce(func.sum(pairs.c.cited), 0)).where(pairs.c.loaded == 1)
    ).one()
    return int(shown), int(used)


def rating_totals(session: Session, view: View = EVERYTHING) -> dict[str, Any]:
    """Model ratings in ``view``: how many, over how many lessons, and their mean score.

    As with usage, a scoped caller counts every rating of its scope's lessons, and those of
    global lessons only on its own work (its PRs and tickets).
    """
    seen: ColumnElement[bool] = true()
    if view.scope is not None:
        ours = or_(view.owns(Rating.pr_key), view.owns(Rating.ticket_key))
        seen = or_(Bullet.scope == view.scope, and_(Bullet.scope == GLOBAL, ours))
    count, lessons, mean = session.execute(
        select(
            func.count(Rating.id),
            func.count(func.distinct(Rating.bullet_id)),
            func.avg(Rating.score),
        )
        .join(Bullet, Bullet.id == Rating.bullet_id)
        .where(seen)
    ).one()
    return {
        "count": int(count),
        "lessons": int(lessons),
        "mean": float(mean) if mean is not None else None,
    }


def lessons_by_status(session: Session, view: View = EVERYTHING) -> dict[str, int]:
    """How many lessons have each status (a status no lesson has is left out)."""
    query = select(Bullet.status, func.count()).where(view.lessons()).group_by(Bullet.status)
    return dict(session.execute(query).all())


def stats(
    session: Session,
    *,
    now: datetime | None = None,
    top: int = 5,
    view: View = EVERYTHING,
    effect_min_tickets: int = EFFECT_MIN_TICKETS,
) -> dict[str, Any]:
    """Bullets by status and scope, usage, coverage, cite rate, model ratings, best and worst,
    recent demotions, and the active lessons the holdout measured as harmful.

    Everything counted and listed is what ``view`` sees: a scoped agent's report is about
    its scope (and global lessons), and names nothing of another scope.
    """
    now = now or clock.now()
    by_status = lessons_by_status(session, view)
    by_scope: dict[str, dict[str, int]] = {}
    for scope, status, count in session.execute(
        select(Bullet.scope, Bullet.status, func.count())
        .where(view.lessons())
        .group_by(Bullet.scope, Bullet.status)
    ):
        by_scope.setdefault(scope, {})[status] = count
    # Reports that weigh nothing (about tickets the bot never saw) are counted apart, so a
    # flood of them cannot inflate loads, cites or the cite rate.
    events = dict(
        session.execute(
            select(UsageEvent.kind, func.count())
            .where(UsageEvent.counted, view.events())
            .group_by(UsageEvent.kind)
        ).all()
    )
    not_counted = session.scalar(
        select(func.count())
        .select_from(UsageEvent)
        .where(UsageEvent.counted.is_(False), view.events())
    )
    outcomes = dict(
        session.execute(
            select(UsageEvent.success, func.count())
            .where(UsageEvent.kind == "cited", UsageEvent.counted, view.events())
            .group_by(UsageEvent.success)
        ).all()
    )
    tickets: dict[str, bool] = {}
    searches = select(Retrieval.ticket_key, Retrieval.bullet_ids).where(
        Retrieval.rank_by != HELD_OUT  # shown nothing by design: not a ticket coverage counts
    )
    for ticket_key, shown in session.execute(searches):
        if ticket_key and view.sees_ticket(ticket_key):
            tickets[ticket_key] = tickets.get(ticket_key, False) or bool(shown)
    loads, cites = events.get("loaded", 0), events.get("cited", 0)
    shown, cited_after_shown = cite_rate_pairs(session, view)
    spoke = comment_decisions(session, view)
    # Ordered by the confidence search ranks by, so "most helpful" means what ranking means:
    # above 0.5 exactly when merged cites outnumber rejected ones.
    trust = confidence_column()
    helpful = session.scalars(
        select(Bullet)
        .where(Bullet.cites_success > Bullet.cites_failure, view.lessons())
        .order_by(trust.desc(), Bullet.cites_success.desc(), Bullet.id)
        .limit(top)
    )
    harmful = session.scalars(
        select(Bullet)
        .where(Bullet.cites_failure > Bullet.cites_success, view.lessons())
        .order_by(trust, Bullet.cites_failure.desc(), Bullet.id)
        .limit(top)
    )
    demoted = session.scalars(
        select(Bullet)
        .where(Bullet.demoted_on >= now - timedelta(days=30), view.lessons())
        .order_by(Bullet.demoted_on.desc())
    )
    return {
        "bullets": {"total": sum(by_status.values()), "by_status": by_status, "by_scope": by_scope},
        "usage": {
            "loads": loads,
            "cites": cites,
            "successes": outcomes.get(True, 0),
            "failures": outcomes.get(False, 0),
            "unknown_outcome": outcomes.get(None, 0),
            "not_counted": int(not_counted or 0),
        },
        "coverage": {
            "tickets": len(tickets),
            "with_lessons": sum(tickets.values()),
            "share": (sum(tickets.values()) / len(tickets)) if tickets else None,
        },
        "comments": spoke,
        "off_topic": [
            {
                "id": row.bullet_id,
                "text": row.text,
                "unhelpful": row.unhelpful,
                "helpful": row.helpful,
                "people": row.people,
                "tickets": row.tickets,
                "last_reason": row.last_reason,
            }
            for row in fit_report.off_topic(session, view)
        ],
        "cite_rate": (cited_after_shown / shown) if shown else None,
        "cite_rate_counts": {"loaded": shown, "cited": cited_after_shown},
        "ratings": rating_totals(session, view),
        "most_helpful": [_bullet_line(b) for b in helpful],
        "most_harmful": [_bullet_line(b) for b in harmful],
        "measured_harmful": [
            {"id": h.bullet_id, "text": h.text, "difference": h.difference, "ci": list(h.ci)}
            for h in measured_harmful(session, effect_min_tickets, view)
        ],
        "recently_demoted": [
            {
                "id": b.id,
                "status": b.status,
                "demoted_on": b.demoted_on,
                "demoted_reason": b.demoted_reason,
                "learned_from": b.learned_from,
            }
            for b in demoted
        ],
        "stale": stale_digest.stale_report(session, view, now),
    }


def comment_decisions(session: Session, view: View = EVERYTHING) -> dict[str, Any]:
    """Tickets the bot judged: how many its comment shows lessons on and how many it kept
    quiet on (no lesson reached the relevance floor), by each ticket's latest judgement."""
    latest: dict[str, bool] = {}
    rows = session.execute(
        select(Retrieval.ticket_key, Retrieval.spoke)
        .where(Retrieval.spoke.is_not(None), Retrieval.ticket_key.is_not(None))
        .order_by(Retrieval.at, Retrieval.id)
    )
    for ticket_key, spoke in rows:
        if view.sees_ticket(ticket_key):
            latest[ticket_key] = bool(spoke)
    posted = sum(latest.values())
    return {
        "tickets": len(latest),
        "posted": posted,
        "abstained": len(latest) - posted,
        "share_posted": posted / len(latest) if latest else None,
    }


@dataclass(frozen=True)
class Candidate:
    """An active bullet nobody has loaded or cited for the idle window."""

    bullet_id: str
    text: str
    scope: str
    age_days: int
    loads: int
    cites: int
    last_loaded_at: datetime | None
    last_cited_at: datetime | None
    cites_success: int = 0
    cites_failure: int = 0
    confidence: float = ranking.START_CONFIDENCE


@dataclass
class PruneReport:
    """What prune found, what stopped it, and what it archived."""

    idle_days: int
    min_age_days: int
    min_observation_days: int
    observed_days: float
    blocked: str | None = None
    candidates: list[Candidate] = field(default_factory=list)
    # Idle, but their confidence is above the prior (more merged cites than rejected):
    # the evidence says they help, so only a person archives them.
    kept: list[Candidate] = field(default_factory=list)
    archived: list[str] = field(default_factory=list)
    applied: bool = False
    # Active lessons the holdout measured as harmful (the whole 95% interval of their effect
    # below zero): listed first, and deprecated with `measured_harmful` when applied.
    harmful: list[MeasuredHarm] = field(default_factory=list)
    deprecated: list[str] = field(default_factory=list)
    # Idle lessons kept because the holdout measured them helpful, whatever their idle time.
    measured_helpful: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class MeasuredHarm:
    """An active lesson whose measured effect is harmful with confidence."""

    bullet_id: str
    text: str
    difference: float
    ci: tuple[float, float]
    shown_tickets: int
    held_out_tickets: int


def observed_days(session: Session, now: datetime) -> float:
    """How many days the usage log spans (0 when it is empty)."""
    # Counted events only: a report that moves nothing must not open prune's gate early.
    first = session.scalar(select(func.min(UsageEvent.ts)).where(UsageEvent.counted))
    if first is None:
        return 0.0
    return max((now - clock.to_utc(first)).total_seconds() / 86400, 0.0)


def prune_candidates(
    session: Session, *, idle_days: int, min_age_days: int, now: datetime
) -> list[Candidate]:
    """Active bullets older than ``min_age_days`` with no load and no cite for ``idle_days``.

    Read from the event log, not the counters, so the answer is the audited truth: a
    bullet with a cite in the window is kept even if counters drifted, and each
    candidate's confidence comes from its rated cite events.
    """
    idle_since = now - timedelta(days=idle_days)
    born_before = now - timedelta(days=min_age_days)
    # A report about a ticket the bot never saw is not use (playbook/outcomes/self_reports.py).
    recent = (
        select(UsageEvent.bullet_id)
        .where(UsageEvent.ts >= idle_since, UsageEvent.counted)
        .distinct()
    )
    rows = list(
        session.scalars(
            select(Bullet)
            .where(
                Bullet.status == "active",
                Bullet.created_at <= born_before,
                Bullet.id.not_in(recent),
            )
            .order_by(Bullet.created_at, Bullet.id)
        )
    )
    rated = _rated_cites(session, [b.id for b in rows])
    candidates = []
    for b in rows:
        wins, losses = rated.get(b.id, (0, 0))
        candidates.append(
            Candidate(
                bullet_id=b.id,
                text=b.text,
                scope=b.scope,
                age_days=int((now - b.created_at).total_seconds() // 86400),
                loads=b.loads,
                cites=b.cites,
                last_loaded_at=b.last_loaded_at,
                last_cited_at=b.last_cited_at,
                cites_success=wins,
                cites_failure=losses,
                confidence=round(ranking.confidence(wins, losses), 3),
            )
        )
    return candidates


def _rated_cites(session: Session, bullet_ids: list[str]) -> dict[str, tuple[int, int]]:
    """Each bullet's cites in merged and in rejected work, counted from the event log."""
    rated: dict[str, tuple[int, int]] = {}
    cited = UsageEvent.kind == "cited"
    # In chunks: an IN list of every idle lesson of a large playbook is too long for one query.
    for start in range(0, len(bullet_ids), 1000):
        chunk = bullet_ids[start : start + 1000]
        for bullet_id, wins, losses in session.execute(
            select(
                UsageEvent.bullet_id,
                func.count().filter(cited, UsageEvent.success.is_(True)),
                func.count().filter(cited, UsageEvent.success.is_(False)),
            )
            .where(UsageEvent.bullet_id.in_(chunk), cited)
            .group_by(UsageEvent.bullet_id)
        ):
            rated[bullet_id] = (wins, losses)
    return rated


def prune(
    session: Session,
    *,
    apply: bool = False,
    idle_days: int = 30,
    min_age_days: int = 30,
    min_observation_days: int = 30,
    actor: str = "prune",
    now: datetime | None = None,
    effect_min_tickets: int | None = None,
) -> PruneReport:
    """Find (and with ``apply``, archive) bullets nobody uses; dry run by default.

    Nothing happens until the usage log spans ``min_observation_days``: a bot installed
    last week has not had the chance to see which lessons are used. With
    ``effect_min_tickets``, the holdout's measured effects count too: a lesson measured
    harmful is deprecated (``measured_harmful``), one measured helpful is never archived.
    """
    now = now or clock.now()
    report = PruneReport(idle_days, min_age_days, min_observation_days, observed_days(session, now))
    helpful: frozenset[str] = frozenset()
    if effect_min_tickets is not None:
        from playbook.experiment import report as experiment

        measured = experiment.measured(session, min_tickets=effect_min_tickets)
        helpful = measured.helpful
        # Its own evidence (both arms over the minimum): no need to wait for the usage log.
        report.harmful = _harmful(session, measured)
        if apply:
            report.deprecated = _deprecate_harmful(session, report.harmful, actor)
    if report.observed_days < min_observation_days:
        remaining = min_observation_days - report.observed_days
        report.blocked = (
            f"the usage log spans {report.observed_days:.1f} days; prune waits until it spans "
            f"{min_observation_days} days ({remaining:.1f} more)"
        )
        return report
    idle = prune_candidates(session, idle_days=idle_days, min_age_days=min_age_days, now=now)
    # The same line as "most helpful" in stats and the ranking's confidence: a lesson whose
    # merged cites outnumber its rejected ones is not archived for being idle.
    # (Counts, not the rounded confidence: above 0.5 exactly when successes > failures.)
    report.kept = [c for c in idle if c.cites_success > c.cites_failure or c.bullet_id in helpful]
    report.measured_helpful = [c.bullet_id for c in idle if c.bullet_id in helpful]
    # Measured harmful is the stronger finding: deprecated for it, not archived for idling.
    kept = {c.bullet_id for c in report.kept} | {h.bullet_id for h in report.harmful}
    report.candidates = [c for c in idle if c.bullet_id not in kept]
    if apply:
        for candidate in report.candidates:
            change = lifecycle.archive(
                session,
                candidate.bullet_id,
                reason=f"unused_{idle_days}d",
                actor=actor,
            )
            if change.changed:
                report.archived.append(candidate.bullet_id)
        report.applied = True
    return report


def measured_harmful(
    session: Session, min_tickets: int = EFFECT_MIN_TICKETS, view: View = EVERYTHING
) -> list[MeasuredHarm]:
    """The active lessons ``view`` sees that the holdout measured as harmful, worst first."""
    # On use: the experiment's statistics load scipy, which no other command needs.
    from playbook.experiment import report as experiment

    return _harmful(session, experiment.measured(session, min_tickets=min_tickets), view)


def _harmful(session: Session, measured: Any, view: View = EVERYTHING) -> list[MeasuredHarm]:
    """The active ones of the lessons ``measured`` harmful (that ``view`` sees), most harmful
    first, with their effect."""
    ids = list(measured.harmful)
    if not ids:
        return []
    active = {
        bullet.id: bullet
        for bullet in session.scalars(
            select(Bullet).where(Bullet.id.in_(ids), Bullet.status == "active", view.lessons())
        )
    }
    found = []
    for bullet_id in ids:
        bullet = active.get(bullet_id)
        if bullet is None:
            continue
        effect = measured.effects[bullet_id]
        low, high = effect["ci"]
        found.append(
            MeasuredHarm(
                bullet_id,
                bullet.text,
                effect["difference"],
                (low, high),
                effect["shown"]["tickets"],
                effect["held_out"]["tickets"],
            )
        )
    return found


def _deprecate_harmful(session: Session, harmful: list[MeasuredHarm], actor: str) -> list[str]:
    """Deprecate each lesson measured harmful; returns those that changed."""
    done = []
    for harm in harmful:
        note = (
            f"measured harmful: tickets shown it merged {-100 * harm.difference:.0f} points less "
            f"often than tickets held out (95% CI {100 * harm.ci[0]:+.0f} to "
            f"{100 * harm.ci[1]:+.0f})"
        )
        change = lifecycle.deprecate(
            session, harm.bullet_id, reason=MEASURED_HARMFUL, actor=actor, note=note
        )
        if change.changed:
            done.append(harm.bullet_id)
    return done


def prune_markdown(report: PruneReport) -> str:
    """The prune report as Markdown, fit for a GitHub Actions job summary."""
    mode = "applied" if report.applied else "dry run"
    lines = [
        f"## Playbook prune ({mode})",
        "",
        f"Idle window {report.idle_days} days, minimum age {report.min_age_days} days; "
        f"the usage log spans {report.observed_days:.1f} days.",
        "",
    ]
    if report.harmful:
        verb = "Deprecated" if report.applied else "Would deprecate"
        lines += [
            f"{verb} {len(report.harmful)} lesson(s) the holdout measured as harmful "
            "(`measured_harmful`):",
            "",
            *(f"- {line}" for line in harm_lines(report.harmful)),
            "",
        ]
    if report.blocked:
        return "\n".join([*lines, f"Nothing pruned: {report.blocked}.", ""])
    if report.kept:
        lines += [
            f"Kept {len(report.kept)} idle lesson(s) cited in more merged than rejected work: "
            + ", ".join(
                f"{c.bullet_id} (measured helpful)"
                if c.bullet_id in report.measured_helpful
                else f"{c.bullet_id} (confidence {c.confidence:.2f})"
                for c in report.kept
            ),
            "",
        ]
    if not report.candidates:
        if report.kept:
            return "\n".join([*lines, "No other lesson was idle.", ""])
        return "\n".join([*lines, "Every active lesson was used in the idle window.", ""])
    verb = "Archived" if report.applied else "Would archive"
    lines += [
        f"{verb} {len(report.candidates)} lesson(s):",
        "",
        "| id | age (days) | last loaded | last cited | loads | cites | lesson |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for c in report.candidates:
        text = c.text.replace("|", "\\|")[:80]
        lines.append(
            f"| {c.bullet_id} | {c.age_days} | {_day(c.last_loaded_at)} | {_day(c.last_cited_at)} "
            f"| {c.loads} | {c.cites} | {text} |"
        )
    if not report.applied:
        lines += ["", "Run with `--apply` to archive them; `playbook-bot restore ID` undoes it."]
    return "\n".join([*lines, ""])


def harm_lines(harmful: list[MeasuredHarm]) -> list[str]:
    """One line per lesson measured harmful: its id, effect, interval and ticket counts."""
    return [
        f"{h.bullet_id}: merge rate {100 * h.difference:+.0f} points when shown "
        f"(95% CI {100 * h.ci[0]:+.0f} to {100 * h.ci[1]:+.0f}; {h.shown_tickets} tickets "
        f"shown, {h.held_out_tickets} held out): {h.text[:60]}"
        for h in harmful
    ]


def _day(value: datetime | None) -> str:
    return value.strftime("%Y-%m-%d") if value else "never"

"""Upkeep: the numbers that tell a team whether its playbook helps."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from playbook import clock, lifecycle, ranking
from playbook.models import Bullet, Retrieval, UsageEvent


def _bullet_line(bullet: Bullet) -> dict[str, Any]:
    return {
        "id": bullet.id,
        "text": bullet.text,
        "status": bullet.status,
        "cites_success": bullet.cites_success,
        "cites_failure": bullet.cites_failure,
    }


def stats(session: Session, *, now: datetime | None = None, top: int = 5) -> dict[str, Any]:
    """Bullets by status and scope, usage, coverage, cite rate, best and worst, recent demotions."""
    now = now or clock.now()
    by_status = dict(
        session.execute(select(Bullet.status, func.count()).group_by(Bullet.status)).all()
    )
    by_scope: dict[str, dict[str, int]] = {}
    for scope, status, count in session.execute(
        select(Bullet.scope, Bullet.status, func.count()).group_by(Bullet.scope, Bullet.status)
    ):
        by_scope.setdefault(scope, {})[status] = count
    events = dict(
        session.execute(select(UsageEvent.kind, func.count()).group_by(UsageEvent.kind)).all()
    )
    outcomes = dict(
        session.execute(
            select(UsageEvent.success, func.count())
            .where(UsageEvent.kind == "cited")
            .group_by(UsageEvent.success)
        ).all()
    )
    tickets: dict[str, bool] = {}
    for ticket_key, shown in session.execute(select(Retrieval.ticket_key, Retrieval.bullet_ids)):
        if ticket_key:
            tickets[ticket_key] = tickets.get(ticket_key, False) or bool(shown)
    loads, cites = events.get("loaded", 0), events.get("cited", 0)
    helpful = session.scalars(
        select(Bullet)
        .where(Bullet.cites_success > Bullet.cites_failure)
        .order_by((Bullet.cites_success - Bullet.cites_failure).desc(), Bullet.id)
        .limit(top)
    )
    harmful = session.scalars(
        select(Bullet)
        .where(Bullet.cites_failure > Bullet.cites_success)
        .order_by((Bullet.cites_failure - Bullet.cites_success).desc(), Bullet.id)
        .limit(top)
    )
    demoted = session.scalars(
        select(Bullet)
        .where(Bullet.demoted_on >= now - timedelta(days=30))
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
        },
        "coverage": {
            "tickets": len(tickets),
            "with_lessons": sum(tickets.values()),
            "share": (sum(tickets.values()) / len(tickets)) if tickets else None,
        },
        "cite_rate": (cites / loads) if loads else None,
        "most_helpful": [
            _bullet_line(b)
            | {"confidence": round(ranking.confidence(b.cites_success, b.cites_failure), 3)}
            for b in helpful
        ],
        "most_harmful": [
            _bullet_line(b)
            | {"confidence": round(ranking.confidence(b.cites_success, b.cites_failure), 3)}
            for b in harmful
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


@dataclass
class PruneReport:
    """What prune found, what stopped it, and what it archived."""

    idle_days: int
    min_age_days: int
    min_observation_days: int
    observed_days: float
    blocked: str | None = None
    candidates: list[Candidate] = field(default_factory=list)
    archived: list[str] = field(default_factory=list)
    applied: bool = False


def observed_days(session: Session, now: datetime) -> float:
    """How many days the usage log spans (0 when it is empty)."""
    first = session.scalar(select(func.min(UsageEvent.ts)))
    if first is None:
        return 0.0
    return max((now - clock.to_utc(first)).total_seconds() / 86400, 0.0)


def prune_candidates(
    session: Session, *, idle_days: int, min_age_days: int, now: datetime
) -> list[Candidate]:
    """Active bullets older than ``min_age_days`` with no load and no cite for ``idle_days``.

    Read from the event log, not the counters, so the answer is the audited truth; a
    bullet with a successful cite in the window is kept even if counters drifted.
    """
    idle_since = now - timedelta(days=idle_days)
    born_before = now - timedelta(days=min_age_days)
    recent = select(UsageEvent.bullet_id).where(UsageEvent.ts >= idle_since).distinct()
    rows = session.scalars(
        select(Bullet)
        .where(
            Bullet.status == "active",
            Bullet.created_at <= born_before,
            Bullet.id.not_in(recent),
        )
        .order_by(Bullet.created_at, Bullet.id)
    )
    return [
        Candidate(
            bullet_id=b.id,
            text=b.text,
            scope=b.scope,
            age_days=int((now - b.created_at).total_seconds() // 86400),
            loads=b.loads,
            cites=b.cites,
            last_loaded_at=b.last_loaded_at,
            last_cited_at=b.last_cited_at,
        )
        for b in rows
    ]


def prune(
    session: Session,
    *,
    apply: bool = False,
    idle_days: int = 30,
    min_age_days: int = 30,
    min_observation_days: int = 30,
    actor: str = "prune",
    now: datetime | None = None,
) -> PruneReport:
    """Find (and with ``apply``, archive) bullets nobody uses; dry run by default.

    Nothing happens until the usage log spans ``min_observation_days``: a bot installed
    last week has not had the chance to see which lessons are used.
    """
    now = now or clock.now()
    report = PruneReport(idle_days, min_age_days, min_observation_days, observed_days(session, now))
    if report.observed_days < min_observation_days:
        remaining = min_observation_days - report.observed_days
        report.blocked = (
            f"the usage log spans {report.observed_days:.1f} days; prune waits until it spans "
            f"{min_observation_days} days ({remaining:.1f} more)"
        )
        return report
    report.candidates = prune_candidates(
        session, idle_days=idle_days, min_age_days=min_age_days, now=now
    )
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
    if report.blocked:
        return "\n".join([*lines, f"Nothing pruned: {report.blocked}.", ""])
    if not report.candidates:
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


def _day(value: datetime | None) -> str:
    return value.strftime("%Y-%m-%d") if value else "never"

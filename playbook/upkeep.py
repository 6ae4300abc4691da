"""Upkeep: the numbers that tell a team whether its playbook helps."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from playbook import clock, ranking
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

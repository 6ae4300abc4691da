"""The stale flags in `stats`: how many lessons are flagged, and the week's flags resolved."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from playbook.anchors.stale import CLEAR, FLAG
from playbook.models import Bullet, Revision
from playbook.scopes import EVERYTHING, View

WEEK = timedelta(days=7)
# How a flag ends, by the first of these revisions after it (a maintainer's look).
RESOLUTIONS = {
    CLEAR: "cleared",
    "edit": "edited",
    "supersede": "superseded",
    "deprecate": "deprecated",
}


def stale_report(session: Session, view: View = EVERYTHING, now: datetime | None = None) -> dict:
    """Flagged lessons now, and the lessons flagged in the 7 days to ``now`` by resolution."""
    flagged = session.scalar(
        select(func.count())
        .select_from(Bullet)
        # As `stale.flagged` lists them: an archived lesson keeps its flag, unlisted.
        .where(Bullet.stale_since.is_not(None), Bullet.status == "active", view.lessons())
    )
    week: dict[str, Any] = {"flagged": 0, "open": 0} | dict.fromkeys(RESOLUTIONS.values(), 0)
    if now is not None:
        since = now - WEEK
        flags = session.execute(
            select(Revision.bullet_id, Revision.id)
            .join(Bullet, Bullet.id == Revision.bullet_id)
            .where(
                Revision.action == FLAG, Revision.at >= since, Revision.at <= now, view.lessons()
            )
        ).all()
        # Each lesson once, by its latest flag of the week (revision ids grow with time).
        last_flag: dict[str, int] = {}
        for bullet_id, revision_id in flags:
            last_flag[bullet_id] = max(revision_id, last_flag.get(bullet_id, 0))
        later = (
            session.execute(
                select(Revision.bullet_id, Revision.action, Revision.id)
                .where(
                    Revision.bullet_id.in_(list(last_flag)),
                    Revision.action.in_(list(RESOLUTIONS)),
                    Revision.id > min(last_flag.values()),
                )
                .order_by(Revision.id)
            ).all()
            if last_flag
            else []
        )
        resolved: dict[str, str] = {}
        for bullet_id, action, revision_id in later:
            if bullet_id not in resolved and revision_id > last_flag[bullet_id]:
                resolved[bullet_id] = RESOLUTIONS[action]
        week["flagged"] = len(last_flag)
        for bullet_id in last_flag:
            week[resolved.get(bullet_id, "open")] += 1
    return {"flagged": int(flagged or 0), "week": week}

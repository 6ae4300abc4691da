"""The stale flags in `stats`: how many lessons are flagged, and the week's flags resolved
(by a maintainer's look, or by the bot's own deprecation)."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from playbook.anchors.stale import CLEAR, FLAG
from playbook.lessons import demotions
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
# A deprecation the bot made by itself (the work was rejected or reverted, the holdout
# measured the lesson harmful) ends the flag too, but nobody looked at what changed.
AUTOMATIC = "deprecated_by_bot"


def stale_report(session: Session, view: View = EVERYTHING, now: datetime | None = None) -> dict:
    """Flagged lessons now, and the lessons flagged in the 7 days to ``now`` by resolution."""
    flagged = session.scalar(
        select(func.count())
        .select_from(Bullet)
        # As `stale.flagged` lists them: an archived lesson keeps its flag, unlisted.
        .where(Bullet.stale_since.is_not(None), Bullet.status == "active", view.lessons())
    )
    week: dict[str, Any] = {"flagged": 0, "open": 0} | dict.fromkeys(
        [*RESOLUTIONS.values(), AUTOMATIC], 0
    )
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
                select(Revision.bullet_id, Revision.action, Revision.id, Revision.after)
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
        for bullet_id, action, revision_id, after in later:
            if bullet_id not in resolved and revision_id > last_flag[bullet_id]:
                resolved[bullet_id] = _resolution(action, after)
        week["flagged"] = len(last_flag)
        for bullet_id in last_flag:
            week[resolved.get(bullet_id, "open")] += 1
    return {"flagged": int(flagged or 0), "week": week}


def _resolution(action: str, after: Any) -> str:
    """How a revision ended a flag: a maintainer's look, or the bot's own deprecation (the
    revision's values keep the ``demoted_reason``, whoever ran the job that wrote it)."""
    reason = after.get("demoted_reason") if isinstance(after, dict) else None
    if action == "deprecate" and demotions.automatic(reason):
        return AUTOMATIC
    return RESOLUTIONS[action]

"""What a closed PR's rating job rates: the lessons shown for its tickets that it did not cite."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import select
from sqlalchemy.orm import Session

from playbook.models import Bullet, Rating, UsageEvent
from playbook.outcomes import pull_reach

# One job asks about this many lessons at most: a ticket's comment shows five or so, and a
# longer list would only make the prompt (and the model's attention) thinner.
MAX_LESSONS = 10


def to_rate(session: Session, pr_key: str, tickets: Sequence[str]) -> list[Bullet]:
    """Lessons loaded for ``tickets``, not cited for them or in the PR, not rated for the PR yet.

    In the order they were first shown; deprecated ones too (a lesson shown and then demoted
    was still shown), but never a proposal (nothing shows those), nor a lesson out of the
    PR's reach (another owner's repository scope).
    """
    if not tickets:
        return []
    events = session.execute(
        select(UsageEvent.bullet_id, UsageEvent.kind, UsageEvent.pr_key, UsageEvent.ticket_key)
        .where((UsageEvent.ticket_key.in_(list(tickets))) | (UsageEvent.pr_key == pr_key))
        .order_by(UsageEvent.ts, UsageEvent.id)
    ).all()
    loaded: list[str] = []
    cited: set[str] = set()
    for bullet_id, kind, _pr, ticket in events:
        if kind == "cited":
            cited.add(bullet_id)
        elif kind == "loaded" and ticket in tickets and bullet_id not in loaded:
            loaded.append(bullet_id)
    rated = set(session.scalars(select(Rating.bullet_id).where(Rating.pr_key == pr_key)))
    wanted = [b for b in loaded if b not in cited and b not in rated][:MAX_LESSONS]
    if not wanted:
        return []
    found = {
        bullet.id: bullet
        for bullet in session.scalars(select(Bullet).where(Bullet.id.in_(wanted)))
        # A Jira ticket is anyone's to name: another owner's lesson shown for it is not
        # rated against this PR's work (`pull_reach`).
        if bullet.status != "proposed"
        and pull_reach.may_touch(pull_reach.repo_of(pr_key), bullet.scope)
    }
    return [found[b] for b in wanted if b in found]

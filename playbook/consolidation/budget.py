"""Each scope's active lessons measured against its context budget."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from playbook.models import Bullet

# Past this share of its budget a scope's lessons are worth consolidating: the design this
# follows condenses a profile's context at 75% of its character budget.
THRESHOLD = 0.75


@dataclass
class ScopeSize:
    """How many active lessons a scope has, their characters, and the scope's budget."""

    scope: str
    lessons: int
    chars: int
    budget: int

    @property
    def share(self) -> float:
        """The characters as a share of the budget (1.0 is the whole budget)."""
        return self.chars / self.budget if self.budget > 0 else 0.0

    @property
    def over(self) -> bool:
        """True when the lessons fill at least THRESHOLD of the budget."""
        return self.chars >= THRESHOLD * self.budget


def scope_sizes(session: Session, budget_for: Callable[[str], int]) -> list[ScopeSize]:
    """Every scope with active lessons, fullest first (share of its budget, then name)."""
    rows = session.execute(
        select(Bullet.scope, func.count(), func.coalesce(func.sum(func.length(Bullet.text)), 0))
        .where(Bullet.status == "active")
        .group_by(Bullet.scope)
    )
    sizes = [
        ScopeSize(scope, int(count), int(chars), int(budget_for(scope)))
        for scope, count, chars in rows
    ]
    return sorted(sizes, key=lambda size: (-size.share, size.scope))

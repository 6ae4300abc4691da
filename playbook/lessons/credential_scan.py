"""Lessons already stored that hold a credential: stored before the rule, or straight into SQL."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.orm import Session

from playbook.lessons import secrets
from playbook.models import Bullet

# Rows are read in pages, so a large playbook is never held in memory at once.
_PAGE = 500


@dataclass(frozen=True)
class Holding:
    """A stored lesson's field holding credentials: which, and where (never the value)."""

    bullet_id: str
    status: str
    field: str  # text | source_url
    findings: list[secrets.Finding]

    def as_dict(self) -> dict[str, object]:
        """For `scan --json`: the kind and place of each credential."""
        return {
            "id": self.bullet_id,
            "status": self.status,
            "field": self.field,
            "findings": [
                {
                    "kind": finding.kind,
                    "what": finding.label,
                    "line": finding.line,
                    "start": finding.start,
                    "end": finding.end,
                }
                for finding in self.findings
            ],
        }


def holding(session: Session) -> Iterator[Holding]:
    """Every lesson, whatever its status, whose text or source_url holds a credential."""
    query = (
        select(Bullet.id, Bullet.status, Bullet.text, Bullet.source_url)
        .order_by(Bullet.number.is_(None), Bullet.number, Bullet.id)
        .execution_options(yield_per=_PAGE)
    )
    for bullet_id, status, text, source_url in session.execute(query):
        for field, value in (("text", text), ("source_url", source_url)):
            found = secrets.find(value)
            if found:
                yield Holding(bullet_id, status, field, found)

"""The scope rule: which lessons, usage events and tickets a caller bound to one scope sees.

An agent token names one repository or Jira project. It sees that scope's lessons and the
global ones, and nothing of another scope: no id, text, reason or ticket key. Every read an
agent can make (lists, lookups, search, usage, stats) filters through a ``View``, so the rule
is written once, here, both as a test of one row and as SQL for many.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from sqlalchemy import ColumnElement, and_, false, not_, or_, select, true
from sqlalchemy.orm import Session

from playbook.models import Bullet, UsageEvent

GLOBAL = "global"


@dataclass(frozen=True)
class View:
    """What one caller may read: every scope (``scope`` None), or one scope and global."""

    scope: str | None = None
    # Who the caller is: a scoped caller also sees the usage it reported itself.
    actor: str | None = None

    @property
    def everything(self) -> bool:
        """True for a caller bound to no scope (a maintainer, an unscoped agent)."""
        return self.scope is None

    def scopes(self) -> set[str] | None:
        """The lesson scopes visible; None means all of them."""
        return None if self.scope is None else {GLOBAL, self.scope}

    def sees_scope(self, scope: str) -> bool:
        """True when lessons of ``scope`` are visible."""
        return self.scope is None or scope in (GLOBAL, self.scope)

    def sees_ticket(self, key: str | None) -> bool:
        """True when ``key`` is work in the caller's scope.

        A ticket belongs to a scope when its key starts with the scope and ``-`` (a Jira
        project's CTMS-4410) or ``#`` (a repository's owner/repo#12).
        """
        if self.scope is None:
            return True
        return bool(key) and key.startswith((f"{self.scope}-", f"{self.scope}#"))  # type: ignore[union-attr]

    def lessons(self) -> ColumnElement[bool]:
        """SQL: the ``Bullet`` rows visible."""
        if self.scope is None:
            return true()
        return Bullet.scope.in_((GLOBAL, self.scope))

    def unseen(self, session: Session, bullet_ids: Iterable[str]) -> set[str]:
        """Those of ``bullet_ids`` that name a lesson the caller may not read.

        For what a visible lesson says about others (``superseded_by``, a revision's reason):
        a link made before the scope rules, or imported, must not name another scope's id.
        """
        wanted = {bullet_id for bullet_id in bullet_ids if bullet_id}
        if self.scope is None or not wanted:
            return set()
        rows = session.scalars(
            select(Bullet.id).where(Bullet.id.in_(sorted(wanted)), not_(self.lessons()))
        )
        return set(rows)

    def events(self) -> ColumnElement[bool]:
        """SQL: the ``UsageEvent`` rows visible.

        A global lesson is used by every scope, so its events (ticket keys, consumers) are
        shown only when they are this scope's work: its tickets or PRs, or the caller's own
        reports. Every event of a lesson in the caller's own scope is visible.
        """
        if self.scope is None:
            return true()
        own = select(Bullet.id).where(Bullet.scope == self.scope)
        shared = select(Bullet.id).where(Bullet.scope == GLOBAL)
        ours = or_(
            UsageEvent.consumer == self.actor if self.actor else false(),
            UsageEvent.ticket_key.startswith(f"{self.scope}-", autoescape=True),
            UsageEvent.ticket_key.startswith(f"{self.scope}#", autoescape=True),
            UsageEvent.pr_key.startswith(f"{self.scope}#", autoescape=True),
        )
        return or_(UsageEvent.bullet_id.in_(own), and_(UsageEvent.bullet_id.in_(shared), ours))


EVERYTHING = View()

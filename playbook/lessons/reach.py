"""Which lessons a comment command may change: its own place's scopes and the global ones.

A GitHub App serves many owners, and Jira is another door still. A person allowed to change
the playbook from one place (write access to a repository, a permitted Jira user in a
project) is allowed there only: a `/playbook` command written on `evil/app` never reaches a
lesson of `victim/secret`, and no GitHub comment reaches a Jira project's lessons. Global
lessons are everyone's, and every permitted commenter may change them, as a maintainer token
bound to one scope may (it sees, and so changes, its scope and global).

A lesson out of reach is answered exactly as an id that does not exist, so a reply tells
nothing of another owner's ids or their status. Every command goes through `reachable`.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy.orm import Session

from playbook.errors import BulletNotFound
from playbook.lessons import fields
from playbook.models import Bullet
from playbook.scope_names import scope_of
from playbook.scopes import GLOBAL

# The one answer for a missing id and for one out of reach: the same words for both.
HINT = "a comment here changes only this place's lessons and the global ones"


@dataclass(frozen=True)
class Place:
    """Where a command was written: the lesson scopes its permitted commenter may change."""

    scopes: frozenset[str]
    # Where a lesson written here goes when the scope its ticket asks for is not this place's.
    home: str

    @classmethod
    def github(cls, repo: str, own_scope: str) -> Place:
        """A repository: its own scope and the scope its settings file names (its home).

        The settings file may only name a scope of the same owner (`playbook.repos.settings`),
        so both are that owner's.
        """
        return cls(frozenset({repo, own_scope}), own_scope)

    @classmethod
    def jira(cls, issue_key: str) -> Place:
        """A Jira issue: its project (``scope_of`` the key), the one the commenter's Jira
        permission was checked in."""
        project = scope_of(issue_key) or issue_key
        return cls(frozenset({project}), project)

    def may_change(self, scope: str) -> bool:
        """True when a lesson of ``scope`` may be changed from here."""
        return scope == GLOBAL or scope in self.scopes

    def scope_for_new(self, wanted: str) -> str:
        """The scope a lesson written here (`/lesson`) goes to: ``wanted`` (its ticket's) when
        it is this place's, else the place's home.

        A PR of any repository can name a Jira key; its comments must not write into that
        Jira project, nor be told which of the project's lessons a text duplicates. Never
        global: a comment speaks for its place, not for every owner.
        """
        return wanted if wanted != GLOBAL and self.may_change(wanted) else self.home


def reachable(session: Session, place: Place, bullet_id: str, field: str = "id") -> Bullet:
    """The lesson ``bullet_id`` names when ``place`` may change it.

    Else BulletNotFound (of ``field``), worded the same whether the lesson is missing or of
    another scope: the reply says nothing of what is not this place's.
    """
    checked = fields.bullet_id(bullet_id, field)
    bullet = session.get(Bullet, checked)
    if bullet is None or not place.may_change(bullet.scope):
        raise BulletNotFound(checked, HINT, field=field)
    return bullet

"""Which lessons and tickets a pull request may touch: its owner's, Jira projects' and global.

A GitHub App is installed per owner, so one owner's repositories are one trust domain: a PR of
``acme/shop`` may cite, approve or demote lessons of ``acme/lib`` (a sibling) and of the scope
its settings file names (always the same owner's, see `playbook.repos.settings`). Jira projects
are worked on from GitHub repositories, so their lessons and keys stay reachable, as do global
lessons. A lesson of another owner's repository is never reached: an ``evil/app`` PR that names
``pb-7`` of ``victim/secret`` or says ``Fixes victim/secret#41`` changes nothing of the victim's.

Every door of a PR's evidence (links, cites, its outcome, a revert, a rating) asks this module.
"""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from playbook.models import Bullet, UsageEvent
from playbook.scope_names import scope_of
from playbook.scopes import GLOBAL


def owner_of(repo_or_key: str) -> str:
    """The owner of ``owner/repo`` or ``owner/repo#12``, case-folded as GitHub compares logins."""
    return repo_or_key.partition("/")[0].casefold()


def repo_of(pr_key: str) -> str:
    """The repository ``owner/repo`` of a PR key ``owner/repo#12`` (``scope_of``'s rule)."""
    return scope_of(pr_key) or pr_key


def may_touch(repo: str, scope: str) -> bool:
    """True when a PR of ``repo`` may cite or move a lesson of ``scope``.

    Global and Jira-project scopes (no ``/``) yes; a repository scope only of the same owner.
    """
    if scope == GLOBAL or "/" not in scope:
        return True
    return owner_of(scope) == owner_of(repo)


def may_link(repo: str, ticket: str) -> bool:
    """True when a PR of ``repo`` may link ``ticket`` for outcomes: a Jira key, or an issue of
    a repository of the same owner (``Fixes other/lib#3`` from another owner links nothing)."""
    if "#" not in ticket:
        return True
    return owner_of(ticket) == owner_of(repo)


def touchable(session: Session, repo: str, bullet_ids: list[str]) -> list[str]:
    """Those of ``bullet_ids`` that name a stored lesson a PR of ``repo`` may touch, in order.

    A missing id and one out of reach are dropped alike: nothing tells them apart.
    """
    if not bullet_ids:
        return []
    scopes = dict(
        session.execute(select(Bullet.id, Bullet.scope).where(Bullet.id.in_(bullet_ids))).all()
    )
    return [i for i in bullet_ids if i in scopes and may_touch(repo, scopes[i])]


def cites_in(session: Session, pr_key: str) -> list[int]:
    """The ids of the cite events made in a PR of lessons it may touch.

    A cite stored before this rule (another owner's lesson) is rated by no outcome.
    """
    rows = session.execute(
        select(UsageEvent.id, Bullet.scope)
        .join(Bullet, Bullet.id == UsageEvent.bullet_id)
        .where(UsageEvent.pr_key == pr_key, UsageEvent.kind == "cited")
        .order_by(UsageEvent.id)
    ).all()
    repo = repo_of(pr_key)
    return [event_id for event_id, scope in rows if may_touch(repo, scope)]

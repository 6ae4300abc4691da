"""What a caller bound to one scope reads of a lesson's links: never another scope's id.

Supersession links stay within a scope now (`playbook.lessons.replacements.may_replace`), but
a link made before that rule, or imported, may still name another owner's lesson, and so may
the revisions that tell of it ("superseded by pb-21: why", "supersedes pb-4"). A scoped reader
gets neither the link nor those revisions; a reader bound to no scope reads everything.
"""

from __future__ import annotations

from collections.abc import Iterable

from sqlalchemy.orm import Session

from playbook.lessons import ids
from playbook.models import Bullet, Revision
from playbook.scopes import View


def hidden(session: Session, view: View, bullets: Iterable[Bullet]) -> set[str]:
    """The ids of ``bullets`` whose replacement (``superseded_by``) ``view`` may not read.

    Their ``superseded_by`` and ``demoted_reason`` (by default "superseded by <id>") are
    not shown to it.
    """
    links = {bullet.id: bullet.superseded_by for bullet in bullets if bullet.superseded_by}
    unseen = view.unseen(session, links.values())
    return {bullet_id for bullet_id, by in links.items() if by in unseen}


def named(revision: Revision) -> set[str]:
    """The lesson ids a revision names: in its reason, and the replacement in its snapshots."""
    found = set(ids.mentioned(revision.reason))
    for values in (revision.before, revision.after):
        if isinstance(values, dict) and isinstance(values.get("superseded_by"), str):
            found.add(values["superseded_by"])
    if revision.action == "replace" and revision.reason:
        # "supersedes <id>: why": an imported id need not look like pb-N.
        replaced = revision.reason.partition("supersedes ")[2].split(" ", 1)[0]
        found.add(replaced.rstrip(":"))
    return found


def readable(session: Session, view: View, revisions: Iterable[Revision]) -> list[Revision]:
    """``revisions`` without those naming a lesson ``view`` may not read.

    Left out whole: the reason of such a revision is that lesson's owner's words.
    """
    rows = list(revisions)
    names = {revision.id: named(revision) for revision in rows}
    unseen = view.unseen(session, set().union(*names.values()))
    return [revision for revision in rows if not names[revision.id] & unseen]

"""Which lessons a search searches: one rule for every door (CLI, API, MCP, the web page).

- Naming a ticket searches that ticket's scope and ``global``, as the bot's comment on it
  does: a Jira key's project, or a GitHub repository's scope (its settings' ``scope:`` as
  last read, else the repository itself).
- Naming a scope searches that scope and ``global`` (the scope wins over a ticket's).
- Naming neither searches every scope the caller may read.
- A caller bound to a scope (an agent token) is always limited to its scope and ``global``:
  naming another scope is refused, as naming another scope's ticket is.

Every answer carries a ``Searched``, so whoever reads it knows which lessons were searched.
"""

from __future__ import annotations

from pydantic import BaseModel, Field
from sqlalchemy.orm import Session

from playbook import scope_names
from playbook.errors import Forbidden
from playbook.lessons import fields
from playbook.repos import stored
from playbook.scopes import GLOBAL, View

# How the answers explain themselves: the words a user reads next to the scopes.
WHY_TICKET = "the ticket's scope and global"
WHY_TICKET_NO_SCOPE = "the ticket's key names no scope, so global only"
WHY_SCOPE = "the scope named and global"
WHY_GLOBAL = "the scope named is global"
WHY_EVERYTHING = "every scope: neither a ticket nor a scope was named"
WHY_TOKEN = "this token's scope and global: a scoped token searches nothing else"


class Searched(BaseModel):
    """The lesson scopes a search searched, and why those."""

    scopes: list[str] | None = Field(
        description="The scopes whose lessons were searched; null means every scope."
    )
    why: str = Field(description="Why these: the ticket, the scope, or neither was named.")

    def words(self) -> str:
        """One line for people: ``CTMS and global (the ticket's scope and global)``."""
        if self.scopes is None:
            return self.why
        named = [scope for scope in self.scopes if scope != GLOBAL]
        shown = " and ".join([*named, GLOBAL] if GLOBAL in self.scopes else named)
        return f"{shown} ({self.why})"

    @property
    def primary(self) -> str | None:
        """The scope the search is for (its relevance calibration): None for every scope."""
        if self.scopes is None:
            return None
        return next((scope for scope in self.scopes if scope != GLOBAL), GLOBAL)


def checked_scope(value: object, field: str = "scope") -> str | None:
    """A scope argument as text (``fields.text``): None when empty, FieldProblem when malformed.

    Any word is a scope (a repository's settings may name one such as ``team-a``): one that
    holds no lesson is searched and finds only global lessons, and the answer says so.
    """
    if value is None:
        return None
    return fields.text(value, field, fields.SCOPE_CHARS) or None


def ticket_scope(session: Session, key: str) -> str | None:
    """The lessons scope of ticket ``key``, as the bot's comment on it uses it.

    A GitHub repository's tickets use its settings' ``scope:`` as last read; a Jira key its
    project; a key of no scope (``x/y``, ``PROJ``) None.
    """
    scope = scope_names.scope_of(key)
    if scope is None or not scope_names.is_repository(scope):
        return scope
    return stored.lessons_scope(session, scope) or scope


def searched(
    session: Session, view: View, *, ticket: str | None = None, scope: str | None = None
) -> Searched:
    """Which scopes a search by a caller with ``view``, naming ``ticket``/``scope``, searches.

    ``ticket`` is expected already checked against the view (``work_scope.check_ticket``);
    a ``scope`` outside a scoped view is refused (Forbidden naming the field).
    """
    asks = ticket is not None and scope is None and view.everything
    found = ticket_scope(session, ticket) if asks and ticket is not None else None
    return searched_by(view, scope=scope, ticket=ticket, found=found)


def searched_by(
    view: View, *, scope: str | None = None, ticket: str | None = None, found: str | None = None
) -> Searched:
    """The rule itself, for a ``ticket`` whose lessons scope (``ticket_scope``) is ``found``."""
    if view.scope is not None:
        if scope is not None and not view.sees_scope(scope):
            raise Forbidden(
                f"scope {scope!r} is not this token's scope {view.scope}: name {view.scope} "
                "or global, or leave it out",
                field="scope",
            )
        if scope == GLOBAL:
            return Searched(scopes=[GLOBAL], why=WHY_GLOBAL)
        return Searched(scopes=[view.scope, GLOBAL], why=WHY_TOKEN)
    if scope is not None:
        if scope == GLOBAL:
            return Searched(scopes=[GLOBAL], why=WHY_GLOBAL)
        return Searched(scopes=[scope, GLOBAL], why=WHY_SCOPE)
    if ticket is not None:
        if found is None:
            return Searched(scopes=[GLOBAL], why=WHY_TICKET_NO_SCOPE)
        return Searched(scopes=sorted({found, GLOBAL}, key=lambda s: s == GLOBAL), why=WHY_TICKET)
    return Searched(scopes=None, why=WHY_EVERYTHING)

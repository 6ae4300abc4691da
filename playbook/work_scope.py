"""Which tickets a caller bound to one scope may name: its scope's work, and no other.

Every ticket a scoped caller names (searched for, reported on, learned from) passes here,
whichever door it came by (API, MCP over HTTP, `playbook-bot mcp`): loads, would-have-shown
exposures, searched text, a holdout arm or a lesson's outcome recorded against another
scope's ticket would be written into, or read out of, that scope's work. It is refused
(Forbidden naming the field, 403 at the API) rather than searched without recording, so an
agent with a wrong ticket learns it at once instead of silently losing its loads.
"""

from __future__ import annotations

from playbook.errors import Forbidden
from playbook.lessons import fields
from playbook.scopes import View

# The rule as the API and MCP documents state it for a search's ticket.
TICKET_DOC = (
    "Record the lessons returned as loaded for this ticket. A token bound to a scope names "
    "only its own tickets (owner/repo#12 of its repository, PROJ-123 of its Jira project): "
    "any other is refused with 403."
)


def check_ticket(view: View, key: str | None, field: str) -> None:
    """Raise Forbidden naming ``field`` unless ``key`` (when given) is work in ``view``'s scope."""
    if key is None or view.sees_ticket(key):
        return
    scope = view.scope or ""
    example = f"{scope}#12" if "/" in scope else f"{scope}-123"
    raise Forbidden(
        f"{field} {key!r} is not work in this token's scope {scope}: name a ticket of "
        f"{scope}, such as {example}",
        field=field,
    )


def optional_ticket(view: View, value: object, field: str) -> str | None:
    """An optional ticket argument, checked as text (``fields.text``), then by ``check_ticket``."""
    if value is None:
        return None
    key = fields.text(value, field, fields.TICKET_KEY_CHARS) or None
    check_ticket(view, key, field)
    return key


def required_ticket(view: View, value: object, field: str) -> str:
    """A ticket argument that must be given, checked as text and then by ``check_ticket``."""
    key = fields.text(value, field, fields.TICKET_KEY_CHARS, required=True)
    check_ticket(view, key, field)
    return key


def check_learned_from(view: View, value: object) -> None:
    """``check_ticket`` on a proposal's ``learned_from``: a lesson follows its ticket's outcome.

    One learned from another scope's ticket would be approved or demoted by that scope's pull
    requests, and its status would tell the caller how they ended. An empty or malformed
    value is left to the lesson's field check, which names it.
    """
    if view.everything or not isinstance(value, str):
        return
    key = fields.text(value, "learned_from", fields.TICKET_KEY_CHARS)
    check_ticket(view, key or None, "learned_from")

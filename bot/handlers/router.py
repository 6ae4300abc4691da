"""Routes a delivery to the handlers registered for its source, event and action."""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from bot.outcomes import PermanentError
from playbook.models import Delivery


@dataclass(frozen=True)
class Event:
    """A delivery as handlers see it: who sent what, and the parsed payload."""

    source: str
    name: str
    action: str | None
    payload: dict[str, Any]
    delivery_id: str
    installation_id: int | None = None

    @classmethod
    def from_row(cls, row: Delivery | Any) -> Event:
        """Parse an inbox row; a payload that is not a JSON object is a PermanentError.

        The receiver refuses such bodies, but rows stored by older versions (a UTF-8 BOM,
        say) or written by hand must end dead with the reason, not stop the worker.
        """
        try:
            payload = json.loads(row.payload)
        except RecursionError:
            raise PermanentError("the stored payload is nested too deeply") from None
        except ValueError as problem:
            raise PermanentError(f"the stored payload is not valid JSON ({problem})") from None
        if not isinstance(payload, dict):
            raise PermanentError("the stored payload is not a JSON object")
        if "\\u0000" in row.payload:  # JSON writes NUL only so; the receiver refuses raw NULs
            payload = without_nul(payload)
        return cls(
            source=row.source,
            name=row.event,
            action=row.action,
            payload=payload,
            delivery_id=row.delivery_id,
            installation_id=row.installation_id,
        )


def without_nul(payload: dict[str, Any]) -> dict[str, Any]:
    """``payload`` with every NUL (U+0000) taken out of its strings and keys, in place.

    A delivery is stored as the text it came as; handlers see it without NULs, which
    PostgreSQL refuses in any text column (a title, a comment, a label written to the
    database): one place for every handler. NUL is invisible, so taking it out changes no
    text a person reads. Iterative, so no payload exhausts the stack.
    """
    holder: list[Any] = [payload]
    stack: list[tuple[Any, Any]] = [(holder, 0)]
    while stack:
        container, at = stack.pop()
        item = container[at]
        if isinstance(item, str):
            container[at] = item.replace("\x00", "")
        elif isinstance(item, dict):
            cleaned = {
                (key.replace("\x00", "") if isinstance(key, str) else key): value
                for key, value in item.items()
            }
            container[at] = cleaned
            stack.extend((cleaned, key) for key in cleaned)
        elif isinstance(item, list):
            stack.extend((item, index) for index in range(len(item)))
    return holder[0]


Handler = Callable[[Event, Any], None]

# Events the bot receives but deliberately does nothing with (acknowledged, marked done).
IGNORED: frozenset[tuple[str, str]] = frozenset(
    {
        ("github", "check_run"),
        ("github", "check_suite"),
        ("github", "status"),
        ("github", "workflow_run"),
        ("github", "workflow_job"),
        ("github", "star"),
        ("github", "watch"),
        ("github", "fork"),
    }
)


class Router:
    """Handlers keyed by (source, event, action); action None means every action.

    Each feature module keeps its own router; ``Router(a.router, b.router)`` combines them
    (as bedevere's ``routing.Router(*routers)`` does), so what the bot handles is listed in
    one place and importing a module changes no router but its own.
    """

    def __init__(self, *routers: Router) -> None:
        self._handlers: dict[tuple[str, str, str | None], list[Handler]] = defaultdict(list)
        for other in routers:
            for key, handlers in other._handlers.items():
                self._handlers[key].extend(handlers)

    def register(
        self, source: str, event: str, action: str | None = None
    ) -> Callable[[Handler], Handler]:
        """Decorator: call the handler for this source/event (and action, if given)."""

        def decorate(handler: Handler) -> Handler:
            self._handlers[(source, event, action)].append(handler)
            return handler

        return decorate

    def handlers_for(self, event: Event) -> list[Handler]:
        """The handlers for an event, specific-action ones first."""
        specific = self._handlers.get((event.source, event.name, event.action), [])
        general = self._handlers.get((event.source, event.name, None), [])
        return [*specific, *general] if event.action is not None else list(general)

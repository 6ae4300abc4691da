"""Errors the domain raises for problems a user can cause and fix."""


class PlaybookError(Exception):
    """A problem a user can fix; its message is one sentence saying what to do."""


class BulletNotFound(PlaybookError):
    """No bullet has the given id."""

    def __init__(
        self,
        bullet_id: str,
        hint: str = "`playbook-bot list --status all` shows ids",
        *,
        field: str = "id",
    ) -> None:
        super().__init__(f"no bullet with id {bullet_id!r}; {hint}")
        self.bullet_id = bullet_id
        # The request field that named it: `id`, or e.g. `by` for a lesson's replacement.
        self.field = field


class ConsolidationNotFound(PlaybookError):
    """No consolidation proposal has the given id."""

    def __init__(
        self, consolidation_id: object, hint: str = "list the consolidations to see their ids"
    ) -> None:
        super().__init__(f"no consolidation with id {consolidation_id!r}; {hint}")
        self.consolidation_id = consolidation_id
        self.field = "id"


class InvalidTransition(PlaybookError):
    """A status change that the lifecycle does not allow."""


class Conflict(InvalidTransition):
    """Another writer changed the status between this one's read and its write.

    An InvalidTransition, so every door answers it as it answers a wrong status (409, a reply
    saying what to do): the loser of a race is told the same thing as one who came later. The
    worker retries it (bot.outcomes.classify): read again, the status decides afresh.
    """


class InvalidInput(PlaybookError):
    """A value that does not fit the field it was given for."""


class Forbidden(PlaybookError):
    """The caller's role or scope may not do this (an agent approving, say)."""

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        # The request field that asked for it, when one did (a ticket of another scope).
        self.field = field


class DatabaseUnavailable(Exception):
    """The database cannot be reached or is not at the schema this code needs.

    Not a PlaybookError on purpose: code that answers a user's mistake with PlaybookError's
    message (a reply on a ticket, a 4xx, an import row's error) must not treat an outage as
    that user's mistake; it is retried, or shown as the service being unavailable.
    """

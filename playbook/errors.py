"""Errors the domain raises for problems a user can cause and fix."""


class PlaybookError(Exception):
    """A problem a user can fix; its message is one sentence saying what to do."""


class BulletNotFound(PlaybookError):
    """No bullet has the given id."""

    def __init__(self, bullet_id: str) -> None:
        super().__init__(
            f"no bullet with id {bullet_id!r}; `playbook-bot list --status all` shows ids"
        )
        self.bullet_id = bullet_id


class InvalidTransition(PlaybookError):
    """A status change that the lifecycle does not allow."""


class InvalidInput(PlaybookError):
    """A value that does not fit the field it was given for."""


class DatabaseUnavailable(PlaybookError):
    """The database cannot be reached or is not at the schema this code needs."""

"""What a stale flag's detail says, read back: whether every file a lesson is about is gone."""

from __future__ import annotations

# What a detail says when every file the lesson names is gone (`files_gone` reads it).
GONE = "removed every file it is about"


def files_gone(detail: str | None) -> str | None:
    """The PR that removed every file a flagged lesson is about, or None."""
    if not detail:
        return None
    head, _, rest = detail.partition(" ")
    return head if rest.startswith(GONE) else None

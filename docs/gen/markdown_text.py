"""Text from the code made safe for a Markdown page: no stray HTML, one line in a table cell."""

from __future__ import annotations


def prose(text: str | None) -> str:
    """``text`` with `<` and `>` escaped outside code spans: `cli:<login>` would otherwise be
    read as an HTML tag and vanish from the page."""
    parts = (text or "").split("`")
    for index in range(0, len(parts), 2):  # the even parts are outside backticks
        parts[index] = parts[index].replace("<", "&lt;").replace(">", "&gt;")
    return "`".join(parts)


def cell(text: str | None) -> str:
    """``text`` fit for one table cell: one line, pipes escaped, no stray HTML."""
    return prose(" ".join((text or "").split())).replace("|", "\\|")

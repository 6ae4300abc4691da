"""Checks for text that reaches the database: length caps and characters PostgreSQL refuses."""

from __future__ import annotations

import re
from datetime import date

from playbook.errors import InvalidInput
from playbook.lessons import characters

# Column sizes of the fields agents and people fill in (see playbook/models.py).
BULLET_ID_CHARS = 64
TICKET_KEY_CHARS = 200
PHASE_CHARS = 64
CONSUMER_CHARS = 200
QUERY_ID_CHARS = 64
SECTION_CHARS = 64
SCOPE_CHARS = 200
SOURCE_CHARS = 50
# GitHub and Jira links are far shorter; browsers stop at about this length.
SOURCE_URL_CHARS = 2_048
TAG_CHARS = 100
MAX_TAGS = 50
REASON_CHARS = 2_000
# The longest lesson by default (PLAYBOOK_MAX_LESSON_CHARS): a few paragraphs an agent reads in a
# ticket comment. Longer texts are pasted logs or documents, which match every query by sheer
# word count and crowd real lessons out of the ranking.
MAX_LESSON_CHARS = 2_000
# A bullet id is cited in comma-separated lists (`--ids pb-1,pb-2`) and in prose, so it holds
# no commas and no white space; and it is ASCII, so that no id can look like another one
# (pb- and a full-width 1, or pb-1 and an Arabic-Indic zero, read as pb-1).
_BULLET_ID = re.compile(r"[\x21-\x2b\x2d-\x7e]+")
_ELLIPSIS = "…"


class FieldProblem(InvalidInput):
    """A value that does not fit its field; ``field`` and ``why`` are kept for reports by line."""

    def __init__(self, field: str, why: str) -> None:
        super().__init__(f"{field}: {why}")
        self.field = field
        self.why = why


def bounded(value: str, field: str, max_chars: int) -> str:
    """``value`` if it fits ``max_chars`` and holds no NUL or unpaired surrogate; else InvalidInput.

    PostgreSQL text cannot hold NUL, and an unpaired surrogate cannot be encoded at all:
    either would fail deep in a transaction instead of here, with the field named.
    """
    if len(value) > max_chars:
        raise InvalidInput(f"{field} is longer than {max_chars} characters")
    if "\x00" in value:
        raise InvalidInput(f"{field} contains a NUL character")
    if not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise InvalidInput(f"{field} contains an unpaired UTF-16 surrogate") from None
    return value


def printable(value: str) -> str:
    """``value`` with NUL characters dropped, for free text taken from webhook payloads."""
    return value.replace("\x00", "") if "\x00" in value else value


def describe(value: object) -> str:
    """What a value from a file is, in a user's words (``a number (7)``), for error sentences."""
    if value is None:
        return "empty"
    if isinstance(value, bool):
        return f"true/false ({str(value).lower()})"
    if isinstance(value, int | float):
        return f"a number ({value!r})"
    if isinstance(value, date):
        return f"a date ({value.isoformat()})"
    if isinstance(value, list | tuple):
        return "a list"
    if isinstance(value, dict):
        return "a mapping"
    return type(value).__name__


def text(
    value: object,
    field: str,
    max_chars: int,
    *,
    required: bool = False,
    empty: str = "is empty",
    limit_hint: str = "",
) -> str:
    """``value`` visible and stripped, if it is a string that fits the field; else FieldProblem.

    Every stored text comes through here, so none holds a direction override or an invisible
    character (`characters.visible`): what a person reads is what the text says. Numbers are
    refused rather than converted: YAML reads `id: 007` as 7 and `0123` as 83, so converting
    would store something other than what the file says.
    """
    if not isinstance(value, str):
        raise FieldProblem(field, f"must be text, not {describe(value)}; quote it")
    if "\x00" in value:  # refused, not dropped, as ever: PostgreSQL could not store it
        raise FieldProblem(field, "contains a NUL character")
    cleaned = characters.visible(value).strip()
    if required and not cleaned:
        if value.strip():
            raise FieldProblem(field, "holds only invisible or control characters; write text")
        raise FieldProblem(field, empty)
    if len(cleaned) > max_chars:
        raise FieldProblem(
            field,
            f"is {len(cleaned):,} characters long, over the {max_chars:,} allowed{limit_hint}",
        )
    if not cleaned.isascii():
        try:
            cleaned.encode("utf-8")
        except UnicodeEncodeError:
            raise FieldProblem(field, "contains an unpaired UTF-16 surrogate") from None
    return cleaned


def bullet_id(value: object, field: str = "id") -> str:
    """A bullet id as given (``pb-12``, ``CTMS-L-1``): ASCII, no commas or spaces, <= 64 chars.

    Checked as given, before `text` drops invisible characters: ``pb-1`` with a zero-width
    space in it is refused, not taken for pb-1.
    """
    if isinstance(value, str) and not value.isascii():
        shown = ascii(value.strip()[:BULLET_ID_CHARS])
        raise FieldProblem(field, f"{shown} is not an id: ids are ASCII, e.g. pb-12")
    cleaned = text(value, field, BULLET_ID_CHARS, required=True)
    if not _BULLET_ID.fullmatch(cleaned):
        raise FieldProblem(field, f"{cleaned!r} has spaces or commas; use e.g. pb-12")
    if cleaned != str(value).strip():  # a control character, not dropped from an id
        raise FieldProblem(field, f"{str(value).strip()!a} holds a control character")
    return cleaned


def shorten(value: str, max_chars: int) -> tuple[str, bool]:
    """``value`` cut at a word boundary to at most ``max_chars`` with an ellipsis; (text, cut?).

    For lessons captured from PR bodies, where refusing would lose the lesson: the cut text
    stays a proposal a person approves, with a link to the full one.
    """
    if len(value) <= max_chars:
        return value, False
    room = max(max_chars - len(_ELLIPSIS), 1)
    cut = value[:room]
    space = cut.rfind(" ")
    # A word boundary in the last fifth is worth the lost characters; a giant "word" is cut.
    if space > room * 4 // 5:
        cut = cut[:space]
    return cut.rstrip() + _ELLIPSIS, True

"""The API's field shapes: non-blank text, ids, and numbers a JSON body means literally."""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Annotated

from pydantic import BeforeValidator, Field

from playbook.anchors import fields as anchors
from playbook.lessons import characters, fields
from playbook.lessons.fields import FieldProblem

# Characters Python's str.strip() drops: a value made only of these is empty to the playbook.
# Spelled out because JSON Schema (ECMA) and Python disagree on what `\s` means.
# So are the controls and invisible characters every stored text loses (`characters.visible`).
_BLANK = (
    r"\x00-\x20\x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000"
    + characters.INVISIBLE_CLASS
)
# Text with something besides white space in it, and no NUL (PostgreSQL text cannot hold one).
NONBLANK = rf"^[^\x00]*[^{_BLANK}][^\x00]*$"
NO_NUL = r"^[^\x00]*$"
# Ids are printable ASCII without commas (`fields.bullet_id`): no look-alike digits.
LESSON_ID = r"^[\x21-\x2b\x2d-\x7e]+$"


def _json_integer(value: object) -> object:
    # Pydantic's lax mode reads true as 1 and "5" as 5; a JSON body means what it says.
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError("must be an integer")
    if isinstance(value, float) and not value.is_integer():
        raise ValueError("must be a whole number")
    return int(value)


def _json_number(value: object) -> object:
    # As for integers: true is not 1 and "0.5" is not a number in a JSON body; NaN has no order.
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError("must be a number")
    if not math.isfinite(value):
        raise ValueError("must be a finite number")
    return float(value)


BodyInt = Annotated[int, BeforeValidator(_json_integer)]
# A number from 0 to 1, the bounds first: so they reach the OpenAPI document inside a union
# (`BodyFraction | None`), where bounds given to the union's Field are left out of it.
BodyFraction = Annotated[float, Field(ge=0, le=1), BeforeValidator(_json_number)]
MIN_RELEVANCE_DOC = (
    "Leave out lessons whose estimated chance of fitting is below this (0..1; by default none "
    "is left out, each lesson carries its `relevance`). The bot's comments use its floor, "
    "PLAYBOOK_MIN_RELEVANCE."
)
SCOPE_DOC = (
    "Search this scope's lessons and the global ones (owner/repo, a Jira project, or global). "
    "Without it, naming a ticket searches that ticket's scope and global, as the bot's comment "
    "does, and naming neither searches every scope the token may read; a token bound to a scope "
    "always searches only its scope and global. The answer's `searched` says which."
)
# A scope in a URL: ASCII owner/repo or a project key, so at most 102 bytes once encoded and
# GET /search with the longest q and ticket still fits gunicorn's request line.
UrlScope = Annotated[
    str, Field(min_length=1, max_length=100, pattern=r"^[A-Za-z0-9._-]+(/[A-Za-z0-9._-]+)?$")
]
BodyScope = Annotated[
    str, Field(min_length=1, max_length=fields.SCOPE_CHARS, pattern=NONBLANK, examples=["CTMS"])
]


# The anchors' rules as JSON Schema patterns (ECMA and Python read them alike): relative (no
# leading `/`, no drive), no `..` segment, no control character or backslash; a name.
PATH_PATTERN = r"^(?! */)(?! *[A-Za-z]:)(?!(?:.*/| *)\.\.(?:/| *$))[^\x00-\x1f\x7f\\]*$"
SYMBOL_PATTERN = r"^ *(?:[A-Za-z_][A-Za-z0-9_.]*)? *$"


def _anchor_check(
    check: Callable[[list[str]], list[str] | None],
    most: int,
    pattern: str,
    longest: int,
) -> Callable[[object], object]:
    # What the schema documents, checked on what is sent; then normalised as every door does.
    # A field's own words (`has a '..' segment`) as a 422 naming it, not a traceback.
    matches = re.compile(pattern).fullmatch

    def validate(value: object) -> object:
        if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
            raise ValueError("must be a list of text")
        items = value
        if len(items) > most:  # what is sent counts, before repeats are dropped
            raise ValueError(f"has {len(items)} items, over the {most} allowed")
        for item in items:
            if len(item) > longest or not matches(item):
                try:
                    check([item])
                except FieldProblem as problem:
                    raise ValueError(problem.why) from None
                raise ValueError(f"{item[:40]!a} is not allowed here")
        try:
            return check(items) or []
        except FieldProblem as problem:
            raise ValueError(problem.why) from None

    return validate


def _search_paths(items: list[str]) -> list[str] | None:
    return anchors.check_paths(items, "paths", anchors.MAX_SEARCH_PATHS)


_Glob = Annotated[
    str, Field(max_length=anchors.PATH_CHARS, json_schema_extra={"pattern": PATH_PATTERN})
]
# A lesson's anchors (`playbook.anchors.fields`): checked and normalised as every door does.
AnchorPaths = Annotated[
    list[_Glob],
    Field(
        max_length=anchors.MAX_PATHS,
        description="Repository globs the lesson is about, e.g. orders/locking.py or orders/**: "
        "relative, no '..'. An empty list clears them.",
    ),
    BeforeValidator(
        _anchor_check(anchors.check_paths, anchors.MAX_PATHS, PATH_PATTERN, anchors.PATH_CHARS)
    ),
]
AnchorSymbols = Annotated[
    list[
        Annotated[
            str,
            Field(max_length=anchors.SYMBOL_CHARS, json_schema_extra={"pattern": SYMBOL_PATTERN}),
        ]
    ],
    Field(
        max_length=anchors.MAX_SYMBOLS,
        description="Function or class names it is about, e.g. OrderLock.acquire.",
    ),
    BeforeValidator(
        _anchor_check(
            anchors.check_symbols, anchors.MAX_SYMBOLS, SYMBOL_PATTERN, anchors.SYMBOL_CHARS
        )
    ),
]
SearchPaths = Annotated[
    list[_Glob],
    Field(max_length=anchors.MAX_SEARCH_PATHS),
    BeforeValidator(
        _anchor_check(_search_paths, anchors.MAX_SEARCH_PATHS, PATH_PATTERN, anchors.PATH_CHARS)
    ),
]
SEARCH_PATHS_DOC = (
    "Files the work is about (e.g. the files an agent edits): lessons anchored there rank "
    "first, as when the text names them. In a URL, one parameter a path: "
    "`paths=orders/locking.py&paths=billing/`; a long list fits POST /search's body better."
)

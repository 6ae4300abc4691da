"""Lesson ids and numbers read from text: ASCII digits only, whatever script the text is in.

Python's ``\\d``, ``str.isdigit()`` and ``int()`` take the digits of every script:
``int("\u0661\u0660")`` (Arabic-Indic) is 10 and ``"\uff11".isdigit()`` (a full-width 1) is
True. An id is ASCII, so `pb-1` followed by an Arabic-Indic zero (which reads as pb-1) is no cite
of pb-10, and a full-width `pb-1` no cite of pb-1. Every reader of ids and numbers from
untrusted text goes through this module.
"""

from __future__ import annotations

import re

# `pb-12` as written in prose, titles, commits and comments (`[PB-12]`, `pb-012`). Linear: the
# lookbehind lets an attempt start only where a word starts, and `++` gives nothing back. The
# lookarounds use Unicode `\w`, so an id run into other letters or digits is no id: pb-1 and
# an Arabic-Indic zero is neither pb-1 nor pb-10.
MENTION = re.compile(r"(?<![\w-])[Pp][Bb]-([0-9]++)(?![\w-])")
# A whole token that is a numbered id, in any case (`/playbook approve PB-12`).
_NUMBERED_ANY_CASE = re.compile(r"[Pp][Bb]-[0-9]++")
# The id `add` gives: `pb-<n>`, lower case.
_NUMBERED = re.compile(r"pb-([0-9]++)")
# `number` is a 32-bit column: nine digits at most.
_MAX_NUMBER_DIGITS = 9


def mentioned(text: str | None) -> list[str]:
    """The numbered ids mentioned in ``text``, as ``pb-<n>`` (``[PB-012]`` is pb-12), once each."""
    seen: dict[str, None] = {}
    for match in MENTION.finditer(text or ""):
        seen.setdefault(f"pb-{int(match.group(1))}", None)
    return list(seen)


def is_numbered(token: str) -> bool:
    """True when ``token`` is a whole `pb-<n>` id in any case, with ASCII digits."""
    return _NUMBERED_ANY_CASE.fullmatch(token) is not None


def canonical_number(bullet_id: str) -> int | None:
    """The n of `pb-<n>` when the id is exactly that (not `pb-007`, which is another id)."""
    match = _NUMBERED.fullmatch(bullet_id)
    if match is None or len(match.group(1)) > _MAX_NUMBER_DIGITS:
        return None
    digits = match.group(1)
    return int(digits) if digits == str(int(digits)) else None


def sort_key(bullet_id: str) -> tuple[int, int, str]:
    """Order `pb-2` before `pb-10`, and imported ids after numbered ones."""
    match = _NUMBERED.fullmatch(bullet_id)
    return (0, int(match.group(1)), "") if match else (1, 0, bullet_id)


def number(text: str, max_digits: int = 18) -> int | None:
    """``text`` as a whole number if it is 1 to ``max_digits`` ASCII digits; else None.

    For numbers read from requests and headers (pages, cursors, delivery ids, retry times),
    where ``str.isdigit()`` would take a full-width 1 and ``int()`` read it as 1.
    """
    if not 0 < len(text) <= max_digits or not text.isascii() or not text.isdigit():
        return None
    return int(text)

"""Reading lessons and playbook commands out of PR bodies and comments."""

from __future__ import annotations

import re
from dataclasses import dataclass

# GitHub caps PR bodies and comments at 65,536 characters. Reading no more than that bounds the
# work whatever a body holds; the patterns below also run in linear time on their own, as they
# read untrusted text: possessive quantifiers (`*+`, `++`) never give back what no later part of
# the pattern could use, so a failed match is not retried from every split of a run.
BODY_CHARS = 65_536
# "## Lessons", "### Lessons learned", "**Lessons learned:**", "Lessons:" on a line of its own.
# Matched against the stripped line, with one `\s*+` between parts: two adjacent `\s*` would try
# every split of a run of spaces.
_HEADING = re.compile(
    r"(?:#{1,6}|\*\*|__)?\s*+lessons(?:\s++learned)?\s*+:?\s*+(?:\*\*|__)?\s*+:?",
    re.IGNORECASE,
)
_HEADING_CHARS = 100  # no heading is longer; longer lines are not tried
_ANY_HEADING = re.compile(r"^\s*+#{1,6}\s++\S")
_ITEM = re.compile(r"^\s*+(?:[-*+]|\d++[.)])\s++(?:\[[ xX]\]\s++)?(.*)$")
# `[^\S\n]` rather than `\s` after `^`: `\s*` crosses newlines, so from every line start it
# would scan all the blank lines that follow.
_COMMAND = re.compile(r"^[^\S\n]*+/(lesson|playbook)\b[ \t]*+(.*)$", re.IGNORECASE | re.MULTILINE)
_ID = re.compile(r"^pb-\d++$", re.IGNORECASE)
MIN_LESSON_CHARS = 12


def _without_comments(text: str) -> str:
    """The text without its HTML comments; an unterminated ``<!--`` hides the rest, as on GitHub.

    A scan with ``str.find`` rather than ``re.sub(r"<!--.*?-->", ...)``: the lazy pattern
    searches the rest of the text for ``-->`` from every ``<!--``, quadratic when none closes.
    """
    kept: list[str] = []
    start = 0
    while (opening := text.find("<!--", start)) != -1:
        kept.append(text[start:opening])
        closing = text.find("-->", opening + len("<!--"))
        if closing == -1:
            return "".join(kept)
        start = closing + len("-->")
    kept.append(text[start:])
    return "".join(kept)


def _is_lessons_heading(line: str) -> bool:
    stripped = line.strip()
    return len(stripped) <= _HEADING_CHARS and _HEADING.fullmatch(stripped) is not None


def lessons_in(body: str | None) -> list[str]:
    """The lessons listed under a "Lessons" (or "Lessons learned") heading of a PR body.

    List items are lessons (continuation lines join their item); a section without a
    list counts each paragraph. The section ends at the next Markdown heading.
    """
    lines = _without_comments((body or "")[:BODY_CHARS]).splitlines()
    start = next((i for i, line in enumerate(lines) if _is_lessons_heading(line)), None)
    if start is None:
        return []
    section: list[str] = []
    for line in lines[start + 1 :]:
        if _ANY_HEADING.match(line) or _is_lessons_heading(line):
            break
        section.append(line)
    items: list[list[str]] = []
    paragraphs: list[list[str]] = [[]]
    in_item = False
    for line in section:
        item = _ITEM.match(line)
        if item:
            items.append([item.group(1).strip()])
            in_item = True
        elif line.strip() and in_item and line.startswith((" ", "\t")):
            items[-1].append(line.strip())  # a continuation line of the item above
        elif line.strip():
            in_item = False
            paragraphs[-1].append(line.strip())
        else:
            in_item = False
            paragraphs.append([])
    found = [" ".join(words) for words in (items or paragraphs)]
    return [text for text in found if len(text) >= MIN_LESSON_CHARS]


@dataclass(frozen=True)
class Command:
    """A `/lesson TEXT` or `/playbook VERB pb-N [reason]` line in a comment."""

    verb: str  # lesson | approve | deprecate | restore
    text: str = ""
    bullet_id: str | None = None
    reason: str | None = None
    problem: str | None = None


PLAYBOOK_VERBS = ("approve", "deprecate", "restore")


def commands_in(body: str | None) -> list[Command]:
    """Every command in a comment, in order; a malformed one carries its problem."""
    found = []
    for match in _COMMAND.finditer(_without_comments((body or "")[:BODY_CHARS])):
        name, rest = match.group(1).lower(), match.group(2).strip()
        if name == "lesson":
            if len(rest) < MIN_LESSON_CHARS:
                found.append(Command("lesson", problem="write the lesson after /lesson"))
            else:
                found.append(Command("lesson", text=rest))
            continue
        verb, _, tail = rest.partition(" ")
        bullet_id, _, reason = tail.strip().partition(" ")
        if verb.lower() not in PLAYBOOK_VERBS or not _ID.match(bullet_id):
            found.append(
                Command(
                    "playbook",
                    problem="use /playbook approve|deprecate|restore pb-N [reason]",
                )
            )
            continue
        found.append(
            Command(verb.lower(), bullet_id=bullet_id.lower(), reason=reason.strip() or None)
        )
    return found

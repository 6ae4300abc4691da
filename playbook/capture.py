"""Reading lessons and playbook commands out of PR bodies and comments."""

from __future__ import annotations

import re
from dataclasses import dataclass

# "## Lessons", "### Lessons learned", "**Lessons learned:**", "Lessons:" on a line of its own.
_HEADING = re.compile(
    r"^\s*(?:(#{1,6})\s*|\*\*|__)?\s*lessons(?:\s+learned)?\s*:?\s*(?:\*\*|__)?\s*:?\s*$",
    re.IGNORECASE,
)
_ANY_HEADING = re.compile(r"^\s*(#{1,6})\s+\S")
_ITEM = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+(?:\[[ xX]\]\s+)?(.*)$")
_COMMENT = re.compile(r"<!--.*?-->", re.DOTALL)
_COMMAND = re.compile(r"^\s*/(lesson|playbook)\b[ \t]*(.*)$", re.IGNORECASE | re.MULTILINE)
_ID = re.compile(r"^pb-\d+$", re.IGNORECASE)
MIN_LESSON_CHARS = 12


def lessons_in(body: str | None) -> list[str]:
    """The lessons listed under a "Lessons" (or "Lessons learned") heading of a PR body.

    List items are lessons (continuation lines join their item); a section without a
    list counts each paragraph. The section ends at the next Markdown heading.
    """
    lines = _COMMENT.sub("", body or "").splitlines()
    start = next((i for i, line in enumerate(lines) if _HEADING.match(line)), None)
    if start is None:
        return []
    section: list[str] = []
    for line in lines[start + 1 :]:
        if _ANY_HEADING.match(line) or _HEADING.match(line):
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
    for match in _COMMAND.finditer(_COMMENT.sub("", body or "")):
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

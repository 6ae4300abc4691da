"""Reading lessons and playbook commands out of PR bodies and comments."""

from __future__ import annotations

import re
from dataclasses import dataclass

from markdown_it import MarkdownIt

from playbook.anchors.fields import check_paths
from playbook.lessons import characters, ids
from playbook.lessons.fields import FieldProblem

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
# A task list item's box, which CommonMark leaves in the item's text.
_TASK_BOX = re.compile(r"\[[ xX]\][ \t]++")
# `[^\S\n]` rather than `\s` after `^`: `\s*` crosses newlines, so from every line start it
# would scan all the blank lines that follow.
_COMMAND = re.compile(r"^[^\S\n]*+/(lesson|playbook)\b[ \t]*+(.*)$", re.IGNORECASE | re.MULTILINE)
MIN_LESSON_CHARS = 12
# CommonMark blocks, as GitHub's Markdown starts from. Only block structure is needed: inline
# parsing (links, emphasis) is off, which also keeps runs of brackets from costing quadratic time.
_MARKDOWN = MarkdownIt("commonmark").disable("inline")


def without_comments(text: str) -> str:
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


def _one_line(text: str) -> str:
    return " ".join(part.strip() for part in text.splitlines() if part.strip())


def lessons_in(body: str | None) -> list[str]:
    """The lessons listed under a "Lessons" (or "Lessons learned") heading of a PR body.

    The body is parsed as Markdown (CommonMark): the section starts at a heading, or a line
    of its own, saying "Lessons" and ends at the next heading. Its list items are lessons,
    at any depth, each with its continuation lines; a section without a list counts each
    paragraph. Text is kept as written (its inline Markdown included).
    """
    tokens = _MARKDOWN.parse(without_comments((body or "")[:BODY_CHARS]))
    inside = False
    in_heading = False
    lists = 0
    items: list[str] = []
    paragraphs: list[str] = []
    for token in tokens:
        kind = token.type
        if kind == "heading_open":
            if inside:
                break
            in_heading = True
        elif kind == "heading_close":
            in_heading = False
        elif kind in ("bullet_list_open", "ordered_list_open"):
            lists += 1
        elif kind in ("bullet_list_close", "ordered_list_close"):
            lists -= 1
        elif kind == "inline":
            lines = token.content.splitlines() or [""]
            if in_heading:
                inside = _is_lessons_heading(token.content)
                continue
            if lists == 0 and _is_lessons_heading(lines[0]):
                # "Lessons:" on a line of its own, then maybe the first paragraph at once.
                if inside:
                    break
                inside = True
                lines = lines[1:]
            if not inside:
                continue
            text = _one_line("\n".join(lines))
            if lists:
                items.append(_TASK_BOX.sub("", text, count=1) if text.startswith("[") else text)
            elif text:
                paragraphs.append(text)
    # Measured as it reads: twelve zero-width spaces are no lesson (`characters.visible`).
    lessons = (characters.visible(text).strip() for text in (items or paragraphs))
    return [text for text in lessons if len(text) >= MIN_LESSON_CHARS]


@dataclass(frozen=True)
class Command:
    """A `/lesson TEXT`, `/playbook VERB pb-N [reason]` or `/playbook supersede pb-N by pb-M
    [reason]` line in a comment."""

    verb: str  # lesson | approve | deprecate | restore | supersede | helpful | unhelpful
    text: str = ""
    bullet_id: str | None = None
    reason: str | None = None
    problem: str | None = None
    by: str | None = None  # supersede: the replacing lesson
    # `/lesson --paths orders/**,web/app.py TEXT`: the anchors its writer gave (they win
    # over the PR's files); None when not given.
    paths: list[str] | None = None


# A person's verdict on whether a lesson fitted the ticket (`playbook.fit`): it changes the
# scope's fit estimate, never the lesson.
FIT_VERBS = ("helpful", "unhelpful")
PLAYBOOK_VERBS = ("approve", "deprecate", "restore", "supersede", *FIT_VERBS)
PLAYBOOK_USAGE = (
    "use /playbook approve|deprecate|restore pb-N [reason], /playbook supersede pb-N by pb-M "
    "[reason], or /playbook helpful|unhelpful pb-N [reason]"
)
FIT_USAGE = (
    "use /playbook helpful pb-N or /playbook unhelpful pb-N [reason], one lesson per command"
)


PATHS_OPTION = "--paths"


def _lesson(rest: str) -> Command:
    """A `/lesson [--paths GLOBS] TEXT` command: GLOBS one comma-separated word, as the CLI's."""
    paths = None
    if rest[: len(PATHS_OPTION) + 1].lower() in (PATHS_OPTION + " ", PATHS_OPTION + "="):
        globs, _, rest = rest[len(PATHS_OPTION) + 1 :].strip().partition(" ")
        try:
            paths = check_paths(globs)
        except FieldProblem as problem:
            return Command("lesson", problem=f"--paths {problem.why}")
        rest = rest.strip()
    if len(rest) < MIN_LESSON_CHARS:
        return Command("lesson", problem="write the lesson after /lesson")
    return Command("lesson", text=rest, paths=paths)


def commands_in(body: str | None) -> list[Command]:
    """Every command in a comment, in order; a malformed one carries its problem."""
    found = []
    for match in _COMMAND.finditer(without_comments((body or "")[:BODY_CHARS])):
        name, rest = match.group(1).lower(), match.group(2).strip()
        if name == "lesson":
            found.append(_lesson(characters.visible(rest).strip()))
            continue
        verb, _, tail = rest.partition(" ")
        bullet_id, _, reason = tail.strip().partition(" ")
        by = None
        if verb.lower() == "supersede":
            # `pb-3 by pb-9 why`, or without the `by`.
            first, _, remainder = reason.strip().partition(" ")
            if first.lower() == "by":
                first, _, remainder = remainder.strip().partition(" ")
            by, reason = (first, remainder) if ids.is_numbered(first) else (None, "")
        if verb.lower() in FIT_VERBS and (
            not ids.is_numbered(bullet_id) or ids.is_numbered(reason.strip().partition(" ")[0])
        ):
            # One lesson per verdict: `pb-3 pb-4` would store "pb-4" as pb-3's reason.
            found.append(Command("playbook", problem=FIT_USAGE))
            continue
        if (
            verb.lower() not in PLAYBOOK_VERBS
            or not ids.is_numbered(bullet_id)
            or (verb.lower() == "supersede" and by is None)
        ):
            found.append(Command("playbook", problem=PLAYBOOK_USAGE))
            continue
        found.append(
            Command(
                verb.lower(),
                bullet_id=bullet_id.lower(),
                reason=reason.strip() or None,
                by=by.lower() if by else None,
            )
        )
    return found


def _kept_unless_feedback(match: re.Match[str]) -> str:
    if match.group(1).lower() != "playbook":
        return match.group(0)
    words = match.group(2).split(maxsplit=1)
    return "" if words and words[0].lower() in FIT_VERBS else match.group(0)


def without_feedback(text: str | None) -> str:
    """``text`` without its `/playbook helpful|unhelpful` lines, well formed or not.

    A verdict on whether a lesson fitted names the lesson without having used it: the ids
    on such a line (its reason's too) are no cites, so feedback never moves a lesson's cites
    or the ratings its PR's outcome would bring.
    """
    kept = _COMMAND.sub(_kept_unless_feedback, text or "")
    if "<!--" not in kept:
        return kept
    # A line can start a command once GitHub hides the comment before it (`<!-- x -->/playbook
    # helpful pb-3`). Rare: only then is the text read as shown, its hidden ids dropped too.
    shown = without_comments(kept)
    cleaned = _COMMAND.sub(_kept_unless_feedback, shown)
    return kept if cleaned == shown else cleaned

"""The managed block the bot keeps in a rule file (AGENTS.md, ...): choose, render, splice."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy import case, select
from sqlalchemy.orm import Session

from playbook.anchors.detail import files_gone
from playbook.errors import PlaybookError
from playbook.lessons.characters import visible
from playbook.lessons.markdown import markdown_text
from playbook.models import Bullet
from playbook.rules import END, START
from playbook.scopes import GLOBAL
from playbook.search import ranking

PATHS: tuple[str, ...] = (
    "AGENTS.md",
    "CLAUDE.md",
    ".github/copilot-instructions.md",
    ".cursor/rules/playbook.mdc",
)
DEFAULT_MAX_CHARS = 8000

# Rows read past the ones that can fit: lessons too long for the room left are skipped, and
# this bounds how many a playbook of 100,000 lessons makes us read.
SKIP_ALLOWANCE = 1000
# The shortest line a lesson can take ("- [x] y" and its line break): no more lines than
# max_chars // this can fit.
_SHORTEST_LINE = len("- [x] y\n")

_TITLE = "# Instructions for coding agents"
_MDC_FRONT_MATTER = (
    "---\n"
    "description: Lessons learned by playbook-bot from this repository's work, "
    "rewritten by the bot\n"
    "alwaysApply: true\n"
    "---\n"
)
_MDC_TITLE = "# Lessons from playbook-bot"

# A marker counts only alone on its line (spaces, tabs and a BOM around it allowed), so that
# prose mentioning the markers in backticks is text like any other.
_START_LINE = re.compile(rf"^[ \t\ufeff]*({re.escape(START)})[ \t]*(?=\r?$)", re.MULTILINE)
_END_LINE = re.compile(rf"^[ \t\ufeff]*({re.escape(END)})[ \t]*(?=\r?$)", re.MULTILINE)
_ENTRY_ID = re.compile(r"^- \[([^\]\s]+)\]", re.MULTILINE)
# Ids that can stand in "[...]" and be read back, and can neither open nor close a comment.
_SAFE_ID = re.compile(r"[^\s<>\[\]`]+")
# What opens or closes an HTML comment ("--!>" closes one too, for browsers).
_COMMENT_SEQUENCES = (("<!--", "<! --"), ("-->", "-- >"), ("--!>", "--! >"))
_SURROGATES = re.compile("[\ud800-\udfff]")


@dataclass(frozen=True)
class Entry:
    """One lesson line of the block: its id, its text made safe, and why it is in."""

    bullet_id: str
    text: str  # one line, made safe (see `one_line`); `_line` escapes its Markdown
    reason: str  # for the PR description: "cited in 3 merged PRs", "new, not used yet"


@dataclass(frozen=True)
class Change:
    """How a new block differs from the one in the file, by lesson id."""

    added: list[Entry]  # in the new block, not in the old
    removed: list[str]  # ids in the old block, not in the new
    kept: list[str]


class BlockProblem(PlaybookError):
    """The file's markers do not make one block; the message says how to fix them."""


def one_line(text: str) -> str:
    """``text`` as one line that cannot open, close or fake a marker, nor reorder the file."""
    # visible() drops controls and direction overrides; split() also breaks on every line
    # separator str.splitlines knows (\v, \f, \x1c-\x1e, \x85, U+2028, U+2029).
    flat = " ".join(_SURROGATES.sub("", visible(text)).split())
    # Replacing one sequence can make another ("<!-->"): repeat until none is left.
    while any(sequence in flat for sequence, _ in _COMMENT_SEQUENCES):
        for sequence, harmless in _COMMENT_SEQUENCES:
            flat = flat.replace(sequence, harmless)
    return flat


def _reason(successes: int, failures: int, loads: int) -> str:
    if successes > 0:
        prs = "merged PR" if successes == 1 else "merged PRs"
        return f"cited in {successes} {prs}"
    if failures > 0:
        return f"confidence {ranking.confidence(successes, failures):.2f}"
    if loads > 0:
        return f"loaded {loads} time{'s' if loads != 1 else ''}"
    return "new, not used yet"


def _header(scope: str) -> str:
    return (
        f"<!-- Lessons from playbook-bot for {one_line(scope)} (cite an id such as [pb-12] in"
        " your PR when a lesson helped). This block is rewritten by the bot: edit outside the"
        " markers, or change the lessons in the playbook. -->"
    )


def _line(entry: Entry) -> str:
    # GitHub renders the file and every agent reads it: the lesson's Markdown is made as inert
    # as in the bot's comments (no HTML, link, image, autolink or mention), by the same escape.
    return f"- [{entry.bullet_id}] {markdown_text(entry.text)}"


def line(entry: Entry) -> str:
    """The lesson's line as the block writes it: its id and its text, Markdown made inert."""
    return _line(entry)


def _header_scope(scopes: Sequence[str]) -> str:
    return next((scope for scope in scopes if scope != GLOBAL), GLOBAL)


def choose(
    session: Session,
    scopes: Sequence[str],
    max_chars: int = DEFAULT_MAX_CHARS,
    *,
    scope: str | None = None,
) -> list[Entry]:
    """Active lessons of ``scopes`` (the repo's and global), helpful first, that fit max_chars.

    Helpful first: most cites in merged work, then confidence, then loads, then oldest.
    The budget counts the whole block as `render` makes it with "\\n" line breaks for
    ``scope`` (default: the first scope that is not global); a lesson whose line does not
    fit the room left is skipped and the next ones are tried.
    """
    if not scopes:
        return []
    header_scope = _header_scope(scopes) if scope is None else scope
    room = max_chars - len(render([], scope=header_scope))
    if room < _SHORTEST_LINE:
        return []
    # Counters never go below zero, but a hand-edited row might: rank as confidence does.
    wins = case((Bullet.cites_success > 0, Bullet.cites_success), else_=0)
    losses = case((Bullet.cites_failure > 0, Bullet.cites_failure), else_=0)
    query = (
        select(
            Bullet.id,
            Bullet.text,
            Bullet.cites_success,
            Bullet.cites_failure,
            Bullet.loads,
            Bullet.stale_detail,
        )
        .where(Bullet.status == "active", Bullet.scope.in_(list(scopes)))
        # For equal wins, confidence (w+1)/(w+l+2) falls exactly as losses rise: ordering
        # by losses is the same order, in integers, so no float ties differ between databases.
        .order_by(
            wins.desc(),
            losses.asc(),
            Bullet.loads.desc(),
            Bullet.number.is_(None),  # ids that are not pb-<n> after the numbered ones
            Bullet.number.asc(),
            Bullet.id.asc(),
        )
        .limit(max_chars // _SHORTEST_LINE + SKIP_ALLOWANCE)
        .execution_options(yield_per=500)
    )
    chosen: list[Entry] = []
    result = session.execute(query)
    try:
        for bullet_id, text, successes, failures, loads, stale_detail in result:
            if files_gone(stale_detail):
                # Every file it is about was removed: out until a maintainer looks at it.
                continue
            if not _SAFE_ID.fullmatch(bullet_id) or markdown_text(bullet_id) != bullet_id:
                # Could not be cited, or read back, from the block; or (an imported id such
                # as "@team" or "https://x") would be a mention or a link where it stands.
                continue
            entry = Entry(bullet_id, one_line(text), _reason(successes, failures, loads))
            if not entry.text:
                continue
            cost = len(_line(entry)) + 1
            if cost <= room:
                chosen.append(entry)
                room -= cost
            if room < _SHORTEST_LINE:
                break
    finally:
        result.close()
    return chosen


def render(entries: Sequence[Entry], *, scope: str, newline: str = "\n") -> str:
    """The block, START line to END line inclusive (no final line break), explanation first."""
    return newline.join([START, _header(scope), *(_line(entry) for entry in entries), END])


@dataclass(frozen=True)
class _Span:
    start: int  # where the start marker begins
    end: int  # just after the end marker


def _decode(existing: bytes) -> str:
    # surrogateescape: bytes that are not UTF-8 come back out exactly as they went in.
    return existing.decode("utf-8", "surrogateescape")


def _encode(text: str) -> bytes:
    return text.encode("utf-8", "surrogateescape")


def _line_number(text: str, index: int) -> int:
    return text.count("\n", 0, index) + 1


def _locate(text: str, what: str = "the file") -> _Span | None:
    """The block's span in ``text``, None without markers; BlockProblem when they are malformed."""
    starts = list(_START_LINE.finditer(text))
    ends = list(_END_LINE.finditer(text))
    if not starts and not ends:
        return None
    fix = "leave exactly one start line and one end line after it, or delete both lines"
    if len(starts) > 1 or len(ends) > 1:
        lines = ", ".join(
            str(_line_number(text, m.start(1)))
            for m in sorted(starts + ends, key=lambda m: m.start())
        )
        raise BlockProblem(
            f"{what} has {len(starts)} {START} and {len(ends)} {END} lines (lines {lines}); {fix}"
        )
    if not ends:
        line = _line_number(text, starts[0].start(1))
        raise BlockProblem(f"{what} has {START} on line {line} but no {END} line; {fix}")
    if not starts:
        line = _line_number(text, ends[0].start(1))
        raise BlockProblem(f"{what} has {END} on line {line} but no {START} line; {fix}")
    start, end = starts[0], ends[0]
    if end.start() < start.start():
        raise BlockProblem(
            f"{what} has {END} on line {_line_number(text, end.start(1))}, before {START} on"
            f" line {_line_number(text, start.start(1))}; {fix}"
        )
    return _Span(start.start(1), end.end(1))


def _newline(text: str) -> str:
    """The file's line ending: CRLF if its first line break is one, else LF."""
    first = text.find("\n")
    return "\r\n" if first > 0 and text[first - 1] == "\r" else "\n"


def current_block(existing: bytes | None) -> str | None:
    """The managed block as it is in the file (markers included), or None."""
    if existing is None:
        return None
    text = _decode(existing)
    span = _locate(text)
    return None if span is None else text[span.start : span.end]


def ids_in(existing: bytes | None) -> list[str]:
    """The lesson ids inside the file's managed block, in order (empty without a block)."""
    block = current_block(existing)
    return [] if block is None else _ENTRY_ID.findall(block)


def _new_file(block: str, path: str) -> str:
    if path.endswith(".mdc"):
        return f"{_MDC_FRONT_MATTER}\n{_MDC_TITLE}\n\n{block}\n"
    return f"{_TITLE}\n\n{block}\n"


def _checked(block: str) -> str:
    """``block`` with LF line breaks, if it is one block as `render` makes it."""
    flat = block.replace("\r\n", "\n")
    try:
        span = _locate(flat, "the block to write")
    except BlockProblem as problem:  # the caller's mistake, not the file's: not a PlaybookError
        raise ValueError(f"not a managed block: {problem}") from None
    if span is None or span.start != 0 or span.end != len(flat):
        raise ValueError(f"not a managed block (from {START} to {END}): {block[:80]!r}")
    return flat


def splice(existing: bytes | None, block: str, path: str) -> bytes:
    """The file with its managed block replaced by ``block``, or ``block`` added to it.

    A file without a block gets it appended after one blank line; a missing one
    (``existing`` None) is created with a title, and for .mdc a front matter with a
    description and ``alwaysApply: true``. Everything outside the markers stays byte for
    byte the same; the block uses the file's own line ending (CRLF files stay CRLF).
    Raises BlockProblem on malformed markers.
    """
    flat = _checked(block)
    if existing is None:
        return _encode(_new_file(flat, path))
    text = _decode(existing)
    span = _locate(text, path)
    newline = _newline(text)
    if span is not None:
        if text[span.start : span.end] == block:
            return existing  # the block as it is, line endings included: nothing to change
        return _encode(text[: span.start] + flat.replace("\n", newline) + text[span.end :])
    own = flat.replace("\n", newline)
    body = text.removeprefix("\ufeff")
    bom = text[: len(text) - len(body)]
    if not body:
        return _encode(f"{bom}{own}{newline}")
    # One blank line before the block; a file without a final line break keeps none.
    if body.endswith(("\n\n", "\r\n\r\n")):
        return _encode(f"{text}{own}{newline}")
    if body.endswith("\n"):
        return _encode(f"{text}{newline}{own}{newline}")
    return _encode(f"{text}{newline}{newline}{own}")


def compare(old_ids: Sequence[str], new: Sequence[Entry]) -> Change:
    """What a new block adds, removes and keeps, against the ids of the block in the file."""
    old = set(old_ids)
    new_ids = {entry.bullet_id for entry in new}
    return Change(
        added=[entry for entry in new if entry.bullet_id not in old],
        removed=list(dict.fromkeys(i for i in old_ids if i not in new_ids)),
        kept=[entry.bullet_id for entry in new if entry.bullet_id in old],
    )

"""An agent rule file (AGENTS.md, CLAUDE.md, .cursorrules, .mdc, ...) read as candidate lessons."""

from __future__ import annotations

import codecs
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import PurePath
from typing import Any

import yaml
from markdown_it import MarkdownIt
from markdown_it.tree import SyntaxTreeNode

from playbook.errors import InvalidInput
from playbook.lessons import characters, fields, secrets
from playbook.lessons.capture import without_comments
from playbook.lessons.checks import normalize_tags
from playbook.rules import END, START
from playbook.search.text import STOP_WORDS, plain_words

# A rule file is a page or two an agent reads with every task; a megabyte is a dump, not rules.
MAX_FILE_BYTES = 1_000_000
# Shorter than this, or one word ("Testing"), is a label, not a rule. Two short words can be
# one ("Use ruff."): an import only proposes, and a maintainer drops what is not a rule.
MIN_RULE_CHARS = 6
# Tags one item carries at most: its headings, its list's label, the file's own.
MAX_ITEM_TAGS = 10
# A heading longer than this is a sentence, not a topic worth a tag.
TAG_TEXT_CHARS = 60
# A lead-in this short ("Testing:", "**Naming**") names its list's topic: a tag, not a rule.
LABEL_WORDS = 5
EXCERPT_CHARS = 60
# Front matter is a few lines of settings; past this it is not front matter.
FRONT_MATTER_LINES = 100
FRONT_MATTER_CHARS = 8_000
# Where a rule applies: Cursor's `globs` and `alwaysApply`, Copilot's `applyTo`, Claude's `paths`.
_SCOPING = ("globs", "alwaysApply", "applyTo", "paths")
_DESCRIPTION_TAGS = 5
_GLOB_TAGS = 5
# Words every rule file's description has, which would tag every lesson alike.
_GENERIC = frozenset(
    {
        *("rule", "rules", "guideline", "guidelines", "instruction", "instructions"),
        *("convention", "conventions", "standard", "standards", "best", "practice"),
        *("practices", "file", "files", "project", "code"),
    }
)

AGENTS, CLAUDE, CURSORRULES, WINDSURFRULES, COPILOT, CURSOR_MDC = (
    "agents",
    "claude",
    "cursorrules",
    "windsurfrules",
    "copilot",
    "cursor-mdc",
)
# Path-scoped rule files: Copilot's `.github/instructions/**/NAME.instructions.md` (`applyTo`)
# and Claude Code's `.claude/rules/**/*.md` (`paths`).
COPILOT_SCOPED, CLAUDE_RULE = "copilot-scoped", "claude-rule"
COPILOT_SUFFIX = ".instructions.md"
CLAUDE_RULES = ".claude/rules"
_BY_NAME = {
    "agents.md": AGENTS,
    "claude.md": CLAUDE,
    ".cursorrules": CURSORRULES,
    ".windsurfrules": WINDSURFRULES,
    "copilot-instructions.md": COPILOT,
}
# The bot's own path-scoped rule files are named so (`.cursor/rules/playbook-orders.mdc`).
BOTS_PREFIX = "playbook-"
# How people name them, for messages.
RULE_FILES = (
    "AGENTS.md",
    "CLAUDE.md",
    ".cursorrules",
    ".windsurfrules",
    ".github/copilot-instructions.md",
    ".cursor/rules/*.mdc",
    ".github/instructions/*.instructions.md",
    ".claude/rules/*.md",
)
# CommonMark blocks with GFM tables (so that a table is seen as one and skipped). Inline
# parsing stays off: a lesson keeps its inline Markdown as written, `code` included, and runs
# of brackets in untrusted text cost no quadratic time.
_MARKDOWN = MarkdownIt("commonmark").disable("inline").enable("table")
_LISTS = ("bullet_list", "ordered_list")
_SENTENCE_END = ".!?;,)"


class RuleFileTooLarge(InvalidInput):
    """A rule file over MAX_FILE_BYTES: refused whole rather than read in part."""

    @staticmethod
    def about(size: int, max_bytes: int = MAX_FILE_BYTES) -> str:
        """What is wrong with a file of ``size`` bytes, and what to do."""
        return (
            f"{size:,} bytes, over the {max_bytes:,} a rule file may have; "
            "import its parts one by one"
        )


@dataclass(frozen=True)
class Item:
    """One candidate lesson: its text, its tags and the 1-based line it starts on."""

    text: str
    tags: tuple[str, ...]
    line: int


@dataclass(frozen=True)
class Skipped:
    """A piece of the file that is no lesson: where, why, and its first words."""

    line: int
    reason: str
    excerpt: str


@dataclass(frozen=True)
class ParsedRules:
    """A rule file read: its candidate lessons, what was skipped, and remarks on the reading."""

    kind: str | None
    items: tuple[Item, ...]
    skipped: tuple[Skipped, ...]
    notes: tuple[str, ...] = ()
    # The front matter's keys saying where the rules apply (`playbook.rules.anchors`).
    scoping: dict[str, Any] = field(default_factory=dict)


def kind_of(path: str | PurePath) -> str | None:
    """Which rule file ``path`` is, by its name (``agents``, ``cursor-mdc``, ...); None if none."""
    text = str(path).replace("\\", "/")
    name = PurePath(text).name.lower()
    if name.endswith(".mdc"):
        return CURSOR_MDC
    if name.endswith(COPILOT_SUFFIX) and name != COPILOT_SUFFIX:
        return COPILOT_SCOPED
    if name.endswith(".md") and f"/{CLAUDE_RULES}/" in f"/{text.lower()}":
        return CLAUDE_RULE
    return _BY_NAME.get(name)


def bots_own(path: str | PurePath) -> bool:
    """Whether ``path`` is one of the bot's own path-scoped rule files (``playbook-<area>.mdc``
    and the like): their lessons are the playbook's already, never a source to import."""
    name = PurePath(str(path).replace("\\", "/")).name.lower()
    return name.startswith(BOTS_PREFIX) and kind_of(path) is not None


def excerpt(text: str, max_chars: int = EXCERPT_CHARS) -> str:
    """The first words of ``text`` on one line, cut with an ellipsis; none if it holds a
    credential (a code block with a token in it is skipped, and is not shown either), however
    it is written: the scan reads the visible text (`secrets.mask`), as every exit does."""
    shown = secrets.mask(text)
    if shown.findings:
        return f"(not shown: it holds {shown.findings[0].label})"
    return fields.shorten(" ".join(shown.text.split()), max_chars)[0]


def parse(
    data: bytes,
    kind: str | None = None,
    *,
    max_chars: int = fields.MAX_LESSON_CHARS,
    max_bytes: int = MAX_FILE_BYTES,
) -> ParsedRules:
    """The candidate lessons of a rule file's bytes; RuleFileTooLarge over ``max_bytes``.

    Each list item, or paragraph, is one lesson, tagged with its nearest headings; code,
    tables, HTML, the bot's managed block and texts too short or over ``max_chars`` are
    skipped, each with its line and reason. Undecodable bytes are replaced, and a note says so.
    """
    if len(data) > max_bytes:
        raise RuleFileTooLarge(RuleFileTooLarge.about(len(data), max_bytes))
    text, notes = _decode(data)
    # Lines as markdown-it counts them, so that its line numbers are the file's.
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    walk = _Walk(lines, max_chars)
    meta = _front_matter(lines)
    walk.file_tags = _file_tags(meta)
    _blank_managed_block(lines, walk)
    root = SyntaxTreeNode(_MARKDOWN.parse("\n".join(lines)))
    walk.title = _title(root.children)
    walk.intro = any(node.type == "heading" and node is not walk.title for node in root.children)
    # Every skipped piece's excerpt is scanned for credentials: one scanner set-up for all.
    with secrets.scanning():
        walk.blocks(root.children, ())
    return ParsedRules(
        kind=kind,
        items=tuple(sorted(walk.items, key=lambda item: item.line)),
        skipped=tuple(sorted(walk.skipped, key=lambda skip: skip.line)),
        notes=tuple(notes),
        scoping={key: meta[key] for key in _SCOPING if key in meta},
    )


def _decode(data: bytes) -> tuple[str, list[str]]:
    """The text of a file, whatever its encoding claims; a note when bytes had to be replaced."""
    for bom, codec in ((codecs.BOM_UTF16_LE, "utf-16-le"), (codecs.BOM_UTF16_BE, "utf-16-be")):
        # Editors on Windows still save UTF-16 now and then, always with its byte order mark.
        if data.startswith(bom):
            return data[len(bom) :].decode(codec, errors="replace"), []
    data = data.removeprefix(codecs.BOM_UTF8)
    try:
        return data.decode("utf-8"), []
    except UnicodeDecodeError as error:
        line = data.count(b"\n", 0, error.start) + 1
        note = (
            f"not valid UTF-8 (first at line {line}): the bytes that are not were read as "
            "\N{REPLACEMENT CHARACTER}"
        )
        return data.decode("utf-8", errors="replace"), [note]


def _front_matter(lines: list[str]) -> dict[str, Any]:
    """The YAML front matter's keys (blanked from ``lines``, which keep their numbers)."""
    if not lines or lines[0].strip() != "---":
        return {}
    for end in range(1, min(len(lines), FRONT_MATTER_LINES)):
        if lines[end].strip() in ("---", "..."):
            break
    else:
        return {}  # no closing line: a thematic break, not front matter
    body = lines[1:end]
    lines[: end + 1] = [""] * (end + 1)
    text = "\n".join(body)
    data: Any = None
    if len(text) <= FRONT_MATTER_CHARS:
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError:
            data = None
    if isinstance(data, dict):
        return {str(key): value for key, value in data.items()}
    # Cursor writes `globs: *.ts,*.tsx` unquoted, which YAML reads as an alias and refuses:
    # then each top-level `key: value` line is taken as written.
    loose: dict[str, Any] = {}
    for line in body:
        key, colon, value = line.partition(":")
        if colon and key.strip() and not line[:1].isspace() and not line.startswith("-"):
            loose[key.strip()] = value.strip()
    return loose


def _file_tags(meta: dict[str, Any]) -> tuple[str, ...]:
    """Tags every item of the file gets: its description's words and its globs, bounded."""
    tags: list[str] = []
    description = meta.get("description")
    if isinstance(description, str):
        words = [
            word
            for word in plain_words(description[:FRONT_MATTER_CHARS])
            if len(word) >= 3 and word not in STOP_WORDS and word not in _GENERIC
        ]
        tags += list(dict.fromkeys(words))[:_DESCRIPTION_TAGS]
    globs: list[str] = []
    # `applyTo` is the same idea in Copilot's .instructions.md files.
    for key in ("globs", "applyTo"):
        value = meta.get(key)
        if isinstance(value, str):
            globs += value.split(",")
        elif isinstance(value, list):
            globs += [glob for glob in value if isinstance(glob, str)]
    cleaned = (glob.strip().strip("'\"").strip() for glob in globs)
    tags += [glob for glob in cleaned if glob and len(glob) <= fields.TAG_CHARS][:_GLOB_TAGS]
    return tuple(normalize_tags(tags))


def _blank_managed_block(lines: list[str], walk: _Walk) -> None:
    """Blank the bot's own block (its lessons must not come back as new ones), noting it."""
    start = 0
    while start < len(lines):
        if START not in lines[start]:
            start += 1
            continue
        end = start
        while end < len(lines) and END not in lines[end]:
            end += 1
        reason = "managed block"
        if end == len(lines):
            reason = "managed block (no end marker: skipped to the end of the file)"
            end -= 1
        walk.skip(start + 1, reason, lines[start])
        lines[start : end + 1] = [""] * (end + 1 - start)
        start = end + 1


def _title(nodes: Sequence[SyntaxTreeNode]) -> SyntaxTreeNode | None:
    """The document's title: its first heading when that is its one level-1 heading."""
    headings = [node for node in nodes if node.type == "heading"]
    top = [node for node in headings if node.tag == "h1"]
    if headings and len(top) == 1 and headings[0] is top[0]:
        return top[0]
    return None


def _inline(node: SyntaxTreeNode) -> str:
    """The raw text of a paragraph or heading (inline parsing is off: Markdown as written)."""
    return "".join(child.content for child in node.children if child.type == "inline")


def _clean(text: str) -> str:
    """A block's text as one line of visible characters, its task box and comments gone."""
    text = " ".join(without_comments(text).split())
    if text[:4] in ("[ ] ", "[x] ", "[X] "):
        text = text[4:]
    return " ".join(characters.visible(text).split())


def _bare(text: str) -> str:
    """``text`` without the emphasis and colon around a label (``**Testing:**`` is Testing)."""
    return text.strip().strip("*_").strip().rstrip(":").strip().strip("*_`").strip()


def _tag(text: str) -> list[str]:
    """A heading's or label's text as tags: lower case, commas splitting, long ones dropped."""
    bare = _bare(text).strip("#").strip()
    if not bare or len(bare) > TAG_TEXT_CHARS:
        return []
    return normalize_tags(bare.lower())


def _is_label(text: str, *, paragraph: bool) -> bool:
    """Whether a list's lead-in only names its topic (``Testing:``, ``**Naming**``)."""
    bare = _bare(text)
    # "Before you push, run:" is a sentence leading in, not a topic.
    if not bare or len(bare.split()) > LABEL_WORDS or "," in bare:
        return False
    stripped = text.rstrip().rstrip("*_").rstrip()
    wrapped = text.startswith(("**", "__")) and text.rstrip(": ").endswith(("**", "__"))
    # A short line right above a list and ending like no sentence does ("Code Style") is a
    # heading in a plain-text file; inside a list, "Use uv" above its details is a rule.
    title = paragraph and not stripped.endswith(tuple(_SENTENCE_END))
    return stripped.endswith(":") or wrapped or title


class _Walk:
    """The walk over the block tree, collecting items and skipped pieces as it goes."""

    def __init__(self, lines: list[str], max_chars: int) -> None:
        self.lines = lines
        self.max_chars = max_chars
        self.items: list[Item] = []
        self.skipped: list[Skipped] = []
        self.headings: list[tuple[int, list[str]]] = []
        self.file_tags: tuple[str, ...] = ()
        self.title: SyntaxTreeNode | None = None
        # Until the first section: what the file is ("This file provides guidance to..."),
        # not a rule. A file without sections has no introduction.
        self.intro = False

    def skip(self, line: int, reason: str, text: str) -> None:
        """Record a skipped piece."""
        self.skipped.append(Skipped(line, reason, excerpt(text)))

    def blocks(self, nodes: Sequence[SyntaxTreeNode], labels: tuple[str, ...]) -> None:
        """Walk sibling blocks: headings set tags, paragraphs and list items become items."""
        label: tuple[str, ...] = ()
        for index, node in enumerate(nodes):
            following = nodes[index + 1] if index + 1 < len(nodes) else None
            pending, label = label, ()
            if node.type == "heading":
                self._heading(node)
            elif node.type == "paragraph":
                text = _clean(_inline(node))
                before_list = following is not None and following.type in _LISTS
                one_line = "\n" not in _inline(node).strip()
                if before_list and one_line and _is_label(text, paragraph=True):
                    label = tuple(_tag(text))
                elif text and self.intro:
                    self.skip(_line(node), "introduction (before the first section)", text)
                elif text:
                    self.emit(text, _line(node), labels)
            elif node.type in _LISTS:
                for item in node.children:
                    self._item(item, labels + pending)
            elif node.type == "blockquote":
                self.blocks(node.children, labels)
            else:
                self._other(node)

    def _heading(self, node: SyntaxTreeNode) -> None:
        level = int(node.tag[1:])
        if node is not self.title:
            self.intro = False
        while self.headings and self.headings[-1][0] >= level:
            self.headings.pop()
        self.headings.append((level, [] if node is self.title else _tag(_clean(_inline(node)))))

    def _other(self, node: SyntaxTreeNode) -> None:
        """A block that is no lesson: code, tables, HTML. Thematic breaks pass unremarked."""
        line = _line(node)
        if node.type in ("fence", "code_block"):
            first = next((part for part in node.content.split("\n") if part.strip()), "")
            self.skip(line, "code block", first or node.markup)
        elif node.type == "table":
            self.skip(line, "table", self.lines[line - 1] if line <= len(self.lines) else "")
        elif node.type == "html_block":
            content = node.content.strip()
            reason = "HTML comment" if content.startswith("<!--") else "HTML block"
            self.skip(line, reason, content)
        elif node.type == "heading":
            self._heading(node)

    def _item(self, node: SyntaxTreeNode, labels: tuple[str, ...]) -> None:
        """A list item: a lesson, or a label or lead-in for the list inside it."""
        own: list[str] = []
        sublists: list[SyntaxTreeNode] = []
        for child in node.children:
            if child.type == "paragraph":
                own.append(_clean(_inline(child)))
            elif child.type in _LISTS:
                sublists.append(child)
            elif child.type == "blockquote":
                self.blocks(child.children, labels)
            else:
                self._other(child)
        text = " ".join(part for part in own if part)
        line = _line(node)
        if sublists and text and _is_label(text, paragraph=False):
            labels = labels + tuple(_tag(text))
        elif sublists and text.endswith(":"):
            # "Before you push:" and its few steps make one lesson; apart, each step
            # would lose what it is for.
            steps = [step.rstrip(" ;,.") for sub in sublists for step in self._texts(sub)]
            steps = [step for step in steps if step]
            if steps:
                self.emit(f"{text} {'; '.join(steps)}", line, labels)
                return
            self.emit(text, line, labels)
        elif text:
            self.emit(text, line, labels)
        for sub in sublists:
            for item in sub.children:
                self._item(item, labels)

    def _texts(self, node: SyntaxTreeNode) -> list[str]:
        """Every text in a list, depth first, for a lead-in joined with its steps."""
        texts: list[str] = []
        for item in node.children:
            for child in item.children:
                if child.type == "paragraph":
                    texts.append(_clean(_inline(child)))
                elif child.type in _LISTS:
                    texts += self._texts(child)
                elif child.type != "blockquote":
                    self._other(child)
        return texts

    def emit(self, text: str, line: int, labels: tuple[str, ...]) -> None:
        """An item, or a skipped piece when too short, too long or a bare lead-in."""
        if not text:
            return
        if len(text) < MIN_RULE_CHARS:
            self.skip(line, f"too short ({len(text)} < {MIN_RULE_CHARS} characters)", text)
        elif len(text.split()) < 2:
            self.skip(line, "too short (one word)", text)
        elif len(text) > self.max_chars:
            self.skip(line, f"too long ({len(text):,} > {self.max_chars:,} characters)", text)
        elif text.rstrip("*_ ").endswith(":"):
            self.skip(line, "lead-in ending in ':'", text)
        else:
            self.items.append(Item(text, self._tags(labels), line))

    def _tags(self, labels: tuple[str, ...]) -> tuple[str, ...]:
        nearest = [tag for _, tags in self.headings[-2:] for tag in tags]
        tags = normalize_tags([*nearest, *labels[-2:], *self.file_tags])
        return tuple(tags[:MAX_ITEM_TAGS])


def _line(node: SyntaxTreeNode) -> int:
    return node.map[0] + 1 if node.map else 1

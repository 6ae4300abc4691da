"""Review feedback as plain sentences: Markdown without quotes, code blocks, links or mentions."""

from __future__ import annotations

import re
from collections.abc import Iterator

from markdown_it import MarkdownIt
from markdown_it.token import Token

from playbook.lessons import characters
from playbook.lessons.capture import without_comments

# GitHub caps a comment or a review body at 65,536 characters; no more is read, whatever arrives.
FEEDBACK_CHARS = 65_536
# GitHub's flavour as far as it matters here: strikethrough (retracted words) and tables (cells
# are no sentences). Inline parsing stays on, unlike the Lessons-section reader, because links
# must lose their URLs; markdown-it-py's inline rules run in about linear time (bench measures
# the worst inputs), and the input is bounded above.
_MARKDOWN = MarkdownIt("commonmark").enable(["strikethrough", "table"])
# A word that is a URL or an @mention, read word by word: no pattern runs over the whole text.
_URL_PREFIXES = ("http://", "https://", "www.")
_MENTION = re.compile(r"@[A-Za-z0-9][A-Za-z0-9/_-]{0,80}[:,.]?")
_CC = frozenset({"cc", "cc:", "/cc", "fyi"})
# Words after which a period ends no sentence.
_ABBREVIATIONS = frozenset({"e.g.", "i.e.", "etc.", "vs.", "cf.", "approx.", "eg.", "ie.", "al."})
_CLOSERS = ".!?"


def _inline_text(token: Token) -> str:
    """An inline token's words: code spans keep their text in backticks, links lose their URL."""
    parts: list[str] = []
    # One entry per open link or strikethrough: whether its words are dropped. An autolink's
    # words are its URL; struck-out words are retracted by the reviewer.
    hidden: list[bool] = []
    for child in token.children or []:
        kind = child.type
        if kind in ("link_open", "s_open"):
            hidden.append(kind == "s_open" or child.markup == "autolink")
            continue
        if kind in ("link_close", "s_close"):
            if hidden:
                hidden.pop()
            continue
        if any(hidden):
            continue
        if kind == "text":
            # `[https://x](https://x)` shows the URL as its text: still a URL, dropped below.
            parts.append(child.content)
        elif kind == "code_inline":
            parts.append(f"`{child.content}`")
        elif kind in ("softbreak", "hardbreak") or (
            kind == "html_inline" and child.content.lower().startswith("<br")
        ):
            parts.append("\n")
        # images, raw HTML and emphasis markers carry no words of the sentence
    return "".join(parts)


def _words_kept(line: str) -> str:
    """The line without URLs, @mentions and a leading "cc"; words are re-joined by one space."""
    kept: list[str] = []
    for word in line.split():
        lowered = word.lower().lstrip("(<[")
        if lowered.startswith(_URL_PREFIXES):
            continue
        if word.startswith("@") and _MENTION.fullmatch(word):
            continue
        if not kept and lowered in _CC:
            continue
        kept.append(word)
    return " ".join(kept)


def _ends_sentence(text: str, index: int) -> bool:
    """Whether the closer at ``index`` ends a sentence: a space, then a capital or the like.

    Looks at a few characters around ``index`` only, so a line of 65,536 periods costs no more
    than one of letters.
    """
    if text[index + 1 : index + 2] != " ":
        return False  # `config.py`, `v1.2`, "?!" (the last closer decides)
    nxt = text[index + 2 : index + 3]
    if not (nxt.isupper() or nxt.isdigit() or nxt in "`\"'\u201c\u2018*>("):
        return False
    word = text[max(0, index - 7) : index + 1].rsplit(" ", 1)[-1]
    return word.lower() not in _ABBREVIATIONS


def _split(paragraph: str) -> Iterator[str]:
    """A paragraph's sentences; a line break ends one when the next line starts a new thought."""
    lines = [_words_kept(line) for line in paragraph.split("\n")]
    lines = [line for line in lines if line]
    joined: list[str] = []
    for line in lines:
        # Hard-wrapped prose goes on in lower case; a capital or a list-ish start is a new thought.
        if joined and not (line[0].isupper() or joined[-1][-1] in _CLOSERS + ":"):
            joined[-1] = f"{joined[-1]} {line}"
        else:
            joined.append(line)
    for line in joined:
        start = 0
        for index, char in enumerate(line):
            if char in _CLOSERS and _ends_sentence(line, index):
                yield line[start : index + 1].strip()
                start = index + 1
        tail = line[start:].strip()
        if tail:
            yield tail


def paragraphs_in(feedback: str | None, *, quotes: bool = False) -> list[str]:
    """The text of each paragraph, heading and list item, in order; Markdown markup dropped.

    Fenced and indented code (GitHub's ```suggestion blocks among them), raw HTML and tables
    are left out; block quotes too unless ``quotes`` (a reviewer quotes code or the author, not
    their own rule). Inline code keeps its text in backticks, a link keeps its text.
    """
    text = characters.visible(without_comments((feedback or "")[:FEEDBACK_CHARS]))
    found: list[str] = []
    quoted = 0
    in_table = 0
    for token in _MARKDOWN.parse(text):
        kind = token.type
        if kind == "blockquote_open":
            quoted += 1
        elif kind == "blockquote_close":
            quoted -= 1
        elif kind == "table_open":
            in_table += 1
        elif kind == "table_close":
            in_table -= 1
        elif kind == "inline" and not in_table and (quotes or not quoted):
            found.append(_inline_text(token))
    return found


def sentences_in(feedback: str | None) -> list[str]:
    """The reviewer's own sentences in a piece of feedback, each on one line, in order.

    Feedback longer than `FEEDBACK_CHARS` loses its last sentence too: the cap may cut it.
    """
    found = [s for paragraph in paragraphs_in(feedback) for s in _split(paragraph) if s]
    return found[:-1] if feedback and len(feedback) > FEEDBACK_CHARS else found


def plain_text(feedback: str | None) -> str:
    """All the words of the feedback, quotes and code included, as one line of plain text.

    URLs and @mentions are left out, as from the sentences.
    """
    text = characters.visible(without_comments((feedback or "")[:FEEDBACK_CHARS]))
    words: list[str] = []
    for token in _MARKDOWN.parse(text):
        if token.type == "inline":
            words.append(_inline_text(token))
        elif token.type in ("fence", "code_block"):
            words.append(token.content)
    # URLs and mentions go as in `sentences_in`, so a quote of a sentence is found in it.
    return " ".join(_words_kept(line) for line in "\n".join(words).split("\n"))

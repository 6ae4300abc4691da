"""Lesson text made inert in GitHub Markdown: the one escape for every place the bot writes it.

The bot's comments, its sync PR's description and the block it keeps in AGENTS.md (which GitHub
renders, and every agent reads) all show lesson text through `markdown_text`, so a lesson can
neither ping people, inject HTML, nor put a link, an image or a tracking pixel anywhere.
"""

from __future__ import annotations

import re

# One character per match and no repetition: escaping runs in linear time on any text.
# What makes Markdown a link or an image: brackets (and the backslash that could undo their
# escape). A URL's scheme and `www.` are what GitHub links by itself, even bare.
_MARKDOWN_SPECIAL = re.compile(r"([\\\[\]])")
_BARE_LINK = re.compile(r"(?i)\b(https?|ftps?)://|\b(www)\.")


def markdown_text(text: str) -> str:
    """``text`` inert in GitHub Markdown: no mention, HTML, link, image or autolink; one line.

    A lesson must not ping people, inject HTML, or put a link or a tracking image into the
    thread: its Markdown shows as the text it is, and copies as the same text.
    """
    text = _MARKDOWN_SPECIAL.sub(r"\\\1", text)
    text = _BARE_LINK.sub(_unlinked, text)
    # "<" as an entity: no tag, no comment and no <autolink> can start, whatever follows.
    return text.replace("@", "@\u200b").replace("<", "&lt;").replace("\n", " ")


def _unlinked(match: re.Match[str]) -> str:
    # An escaped `:` or `.` renders as itself, and GitHub's autolinker no longer sees a URL.
    scheme, www = match.group(1), match.group(2)
    return f"{scheme}\\://" if scheme else f"{www}\\."

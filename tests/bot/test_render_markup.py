"""A lesson's Markdown never becomes a link, an image or a mention in the bot's GitHub comment."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st
from markdown_it import MarkdownIt

from bot.render import lessons_comment
from tests.support import hit

COMMONMARK = MarkdownIt("commonmark")


def rendered(text: str, learned_from: str = "CTMS-1") -> str:
    comment, _ = lessons_comment([hit(text, learned_from)], markup="markdown", max_chars=5000)
    return COMMONMARK.render(comment)


@pytest.mark.parametrize(
    "text",
    [
        "See [the runbook](https://evil.example/phish) before deploying",
        "Track it ![x](https://tracker.example/pixel.png?u=1) quietly",
        "Reference style [runbook][1] works too\n\n[1]: https://evil.example",
        r"Escaped already \[x\](https://evil.example) or \\[x](https://evil.example)",
        "An autolink <https://evil.example> in angle brackets",
    ],
)
def test_links_and_images_show_as_text(text: str) -> None:
    html = rendered(text)
    assert "<a " not in html and "<img" not in html
    # The reader still sees what the lesson says, brackets and address included.
    assert "evil.example" in html or "tracker.example" in html


def test_bare_addresses_are_not_autolinked_by_github() -> None:
    comment, _ = lessons_comment(
        [hit("Read https://docs.example/retries and www.example.com/faq, or HTTP://X.example")],
        markup="markdown",
        max_chars=5000,
    )
    # GitHub links a bare scheme:// or www. by itself; an escaped : or . is not one.
    assert not re.search(r"(?i)(https?|ftp)://", comment.replace("\\://", ""))
    assert "www\\.example.com" in comment and "https\\://docs.example" in comment
    text = COMMONMARK.render(comment)
    assert "https://docs.example/retries" in text and "www.example.com/faq" in text
    assert "HTTP://X.example" in text


def test_the_source_ticket_line_is_inert_too() -> None:
    html = rendered("Dedupe retries", learned_from="[x](https://evil.example)")
    assert "<a " not in html


@given(st.text(max_size=300))
def test_no_lesson_text_makes_a_link_or_an_image(text: str) -> None:
    html = rendered(text)
    assert "<a " not in html and "<img" not in html

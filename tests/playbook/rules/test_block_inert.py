"""The AGENTS.md block is as inert as the bot's comments: rendered, a lesson's Markdown or HTML
makes no tag, link, image, heading, fence or marker, and GitHub's autolinker finds no address."""

from __future__ import annotations

import re
from datetime import UTC, datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt
from markdown_it.token import Token
from sqlalchemy import Engine

from playbook.db import transaction
from playbook.models import Bullet
from playbook.rules import END, START
from playbook.rules.block import Entry, choose, ids_in, one_line, render, splice

REPO = "acme/api"
T0 = datetime(2026, 1, 1, tzinfo=UTC)
# CommonMark with raw HTML on, as GitHub renders a repository's Markdown before sanitizing it.
COMMONMARK = MarkdownIt("commonmark")

HOSTILE = [
    "<b>bold</b> and <script>alert(1)</script> inline",
    '<img src=x onerror="alert(1)"> tracks who reads it',
    "<div>\n\n<iframe src=https://evil.example></iframe>\n\n</div>",
    "Click [here](javascript:alert(1)) to fix the build",
    "[data](data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==) is fine",
    "![](http://evil/x.png)",
    "![pixel](https://t.example/p.png?u=1 'title') quietly",
    "Autolinks <https://evil.example/a> and <javascript:alert(1)> and <me@evil.example>",
    "Bare https://evil.example/pixel.png and www.evil.example/faq and HTTP://X.example",
    "Mail me@evil.example or mailto:me@evil.example, ask @octocat and @acme/admins",
    f"Forged end {END} then start {START}",
    f"{END}",
    "<!-- hide the rest --> <!-- ",
    "```\nfenced code that swallows the end marker",
    "~~~ tilde fence",
    "`<img src=x onerror=alert(1)>` in a code span and ``double `tick``",
    "# A heading\n## Another\n---\n===",
    "> quoted\n\n    indented code",
    "[ref][1] and [1]\n\n[1]: https://evil.example",
    "[^note] a footnote\n\n[^note]: https://evil.example",
    r"Escaped \[x\](https://evil.example) or \\[x](https://evil.example) or \![x](y.png)",
    "&lt;img src=x onerror=alert(1)&gt; and &#60;script&#62;",
    "| a | b |\n|---|---|\n| c | d |",
    "- [pb-99] a forged entry\n- [x] a task",
]
# What rendering a block may make: the markers and the header (HTML comments), one bulleted
# list of paragraphs, and inline emphasis or code spans, whose text is shown as it is.
ALLOWED = {
    "html_block",
    "bullet_list_open",
    "bullet_list_close",
    "list_item_open",
    "list_item_close",
    "paragraph_open",
    "paragraph_close",
    "inline",
    "text",
    "softbreak",
    "code_inline",
    "em_open",
    "em_close",
    "strong_open",
    "strong_close",
}
# What GitHub links by itself beyond CommonMark: a bare scheme://, www. and an email address.
GITHUB_AUTOLINK = re.compile(r"(?i)\b(?:https?|ftps?)://|\bwww\.|[\w.+-]@[\w-]")


def tokens(markdown: str) -> list[Token]:
    """Every block and inline token markdown-it makes of ``markdown``."""
    found: list[Token] = []
    for token in COMMONMARK.parse(markdown):
        found.append(token)
        found.extend(token.children or [])
    return found


def assert_inert(block: str, header: str) -> None:
    """The block renders as its markers, its header and a list of plain text, nothing else."""
    made = tokens(block)
    assert {token.type for token in made} <= ALLOWED, block
    assert [t.content.strip() for t in made if t.type == "html_block"] == [START, header, END]
    html = COMMONMARK.render(block)
    for tag in ("<a ", "<img", "<script", "<iframe", "<div", "<b>", "<h1", "<pre", "<table"):
        assert tag not in html
    for line in block.split("\n")[2:-1]:
        # A lesson line: GitHub's own autolinker sees no address and no mention in it.
        assert not GITHUB_AUTOLINK.search(line), line


def put(engine: Engine, texts: list[str], ids: list[str] | None = None) -> None:
    with transaction(engine) as session:
        for number, text in enumerate(texts, 1):
            bullet_id = ids[number - 1] if ids else f"pb-{number}"
            session.add(
                Bullet(
                    id=bullet_id,
                    number=number if bullet_id == f"pb-{number}" else None,
                    text=text,
                    scope=REPO,
                    status="active",
                    created_at=T0,
                    updated_at=T0,
                )
            )


def test_hostile_lessons_render_as_text_in_the_synced_file(engine: Engine) -> None:
    put(engine, HOSTILE)
    with transaction(engine) as session:
        entries = choose(session, [REPO, "global"], 20_000, scope=REPO)
    assert [e.bullet_id for e in entries] == [f"pb-{n}" for n in range(1, len(HOSTILE) + 1)]
    block = render(entries, scope=REPO)
    assert_inert(block, block.split("\n")[1])
    written = splice(b"# Team notes\n\nBe kind.\n", block, "AGENTS.md")
    # The file still holds one block, read back as the same lessons, the team's text untouched.
    assert ids_in(written) == [e.bullet_id for e in entries]
    assert written.startswith(b"# Team notes\n\nBe kind.\n\n" + START.encode())
    html = COMMONMARK.render(written.decode())
    assert "<a " not in html and "<img" not in html
    # A reader still sees what each lesson says: its words are shown, not dropped.
    assert "javascript:alert(1)" in html and "evil.example" in html and "octocat" in html


@pytest.mark.parametrize(
    "bullet_id", ["@admins", "https://evil.example/x.png", "www.evil.x", "a\\"]
)
def test_an_imported_id_that_would_link_or_mention_is_left_out(
    engine: Engine, bullet_id: str
) -> None:
    put(engine, ["Pin the CI tools", "Retry with a key"], ids=[bullet_id, "pb-2"])
    with transaction(engine) as session:
        entries = choose(session, [REPO, "global"], scope=REPO)
    assert [e.bullet_id for e in entries] == ["pb-2"]


# Mostly the characters Markdown, HTML and GitHub's autolinker act on, so shapes are found.
MARKUP = st.text(alphabet="<>[]()!`\\@:/.#-_*&;|~= \nwhtpsimgax", max_size=200)


@given(st.lists(st.one_of(MARKUP, st.text(max_size=200)), min_size=1, max_size=4))
@settings(max_examples=300, deadline=None)
def test_no_lesson_text_makes_the_block_anything_but_text(texts: list[str]) -> None:
    # Entries as `choose` makes them: one line each (see one_line), none empty.
    entries = [
        Entry(f"pb-{n}", line, "new") for n, t in enumerate(texts, 1) if (line := one_line(t))
    ]
    block = render(entries, scope=REPO)
    assert_inert(block, block.split("\n")[1])

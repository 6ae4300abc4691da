"""Parsers of untrusted text: linear time on hostile input, and sound results on any input."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bot.render import lessons_comment
from playbook.lessons.capture import (
    FIT_VERBS,
    MIN_LESSON_CHARS,
    PLAYBOOK_VERBS,
    Command,
    commands_in,
    lessons_in,
    without_feedback,
)
from playbook.outcomes.links import bullet_ids, pull_request_links
from playbook.search.retrieval import Hit
from playbook.search.text import (
    STOP_WORDS,
    Ticket,
    bullet_tokens,
    query_tokens,
    strip_markup,
    tokenize,
)
from tests.hostile_texts import parser_inputs
from tests.support import hang_guard, hit

HOSTILE = parser_inputs()
# Each call on one of these 100,000 characters takes well under a second when linear, and a
# minute or more when a pattern backtracks (`\s+$` over the spaces: 60 s). The guard only stops
# such a hang; bench/hostile_text.py measures how long each parser takes.
HANG_SECONDS = 10


def _hit(text: str) -> Hit:
    return hit(text, confidence=1.0)


def _jira(text: str) -> list[str]:
    issue = {"key": "CTMS-1", "fields": {"summary": text, "description": text, "labels": ["x"]}}
    return query_tokens(Ticket.from_jira(issue))


PARSERS: dict[str, Callable[[str], Any]] = {
    "tokenize": tokenize,
    "strip_markup": strip_markup,
    "lessons_in": lessons_in,
    "commands_in": commands_in,
    "without_feedback": without_feedback,
    "bullet_ids": bullet_ids,
    "pull_request_links": lambda text: pull_request_links(text, text, text, "acme/shop"),
    "jira ticket": _jira,
    "github issue": lambda text: query_tokens(
        Ticket.from_github({"number": 1, "title": text, "body": text}, "acme/shop")
    ),
    "cli ticket": lambda text: query_tokens(Ticket.from_text(text)),
    "bullet_tokens": lambda text: bullet_tokens(text, ["tag"]),
    "jira comment": lambda text: lessons_comment([_hit(text)], markup="jira", max_chars=32_767),
    "github comment": lambda text: lessons_comment([_hit(text)], markup="github", max_chars=65_536),
}


@pytest.mark.parametrize("parser", PARSERS.values(), ids=list(PARSERS))
@pytest.mark.parametrize("text", HOSTILE.values(), ids=list(HOSTILE))
def test_hostile_text_is_parsed_without_backtracking(
    parser: Callable[[str], Any], text: str
) -> None:
    with hang_guard(HANG_SECONDS, "parsing a hostile text"):
        parser(text)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "INFO [QuorumPeer[myid=1](plain=/0:0:2181)(secure=disabled):QuorumPeer@1022] - UP",
            "INFO QuorumPeer[myid=1 (secure=disabled):QuorumPeer@1022] - UP",
        ),
        ("ping [~dana [x] now", "ping   now"),
        ("{code:title={x}}z{code} after", " }z  after"),
        (
            "![img](a.png) and [link](https://en.wikipedia.org/wiki/Foo_(bar)) end",
            "img  and link ) end",
        ),
        ("[open] [b](c", "[open] [b](c"),
        ("{panel:title=My Title|borderStyle=dashed}body{panel}", " body "),
        ("List<Map<String, Integer>> x", "List > x"),
        ("[a][b](c) d [e|f] ![g]h", "[a]b  d e  ![g]h"),
    ],
)
def test_markup_is_stripped_as_before(text: str, expected: str) -> None:
    # Nested and unclosed brackets come out as the earlier, backtracking patterns left them.
    assert strip_markup(text) == expected


def test_an_unterminated_comment_hides_the_rest() -> None:
    body = (
        "## Lessons\n- Visible lesson about retries\n<!-- template\n- Hidden lesson about locks\n"
    )
    assert lessons_in(body) == ["Visible lesson about retries"]
    assert commands_in("<!-- /lesson Run migrations before the worker") == []
    assert commands_in("<!-- /lesson x -->\n/lesson Run migrations before the worker") == [
        Command("lesson", text="Run migrations before the worker")
    ]


def test_headings_with_space_inside_are_still_headings() -> None:
    for heading in ("  ##   Lessons   learned  :", "** Lessons **", "__lessons:__", "#lessons"):
        assert lessons_in(f"{heading}\n- Retry with jitter and a cap\n") == [
            "Retry with jitter and a cap"
        ], heading


def test_text_is_bounded_where_it_is_parsed() -> None:
    lesson = "Retry with jitter and a cap"
    # (A blank line ends the item: in Markdown, a line right after it would continue it.)
    assert lessons_in(f"## Lessons\n- {lesson}\n\n" + "x" * 200_000) == [lesson]
    assert lessons_in("y" * 70_000 + f"\n## Lessons\n- {lesson}\n") == []
    assert commands_in("\n" * 70_000 + f"/lesson {lesson}") == []
    links = pull_request_links("t" * 2_000 + " CTMS-1", "b" * 2_000 + "-ctms-2", None, "a/b")
    assert links.jira_keys == ()
    assert pull_request_links("t", "main", "x" * 70_000 + " Fixes CTMS-3", "a/b").tickets == ()
    jira = Ticket.from_jira({"key": "A-1", "fields": {"summary": "s" * 5_000, "description": "d"}})
    assert len(jira.summary) == 1_000 and jira.description == "d"
    github = Ticket.from_github({"number": 1, "title": "t", "body": "b" * 100_000}, "a/b")
    assert len(github.description or "") == 65_536
    assert len(Ticket.from_text("s" * 5_000 + "\nrest").summary) == 1_000
    assert Ticket.from_text("Checkout fails\nafter deploy") == Ticket(
        key=None, summary="Checkout fails", description="after deploy"
    )


# Markup characters, words and the fragments the parsers look for, in any order.
FRAGMENTS = [
    *"[]{}()<>!~|#*-_/:.\n\t @`=",
    *"aBxZ09",
    "pb-",
    "PB-1",
    "pb-007",
    "CTMS-",
    "ab-12",
    "UTF-8",
    "fixes ",
    "Closes: ",
    "resolved ",
    "owner/repo",
    "#12",
    "/lesson ",
    "/playbook ",
    "approve ",
    "deprecate ",
    "restore ",
    "helpful ",
    "unhelpful ",
    "## Lessons\n",
    "**Lessons learned:**\n",
    "- ",
    "* [x] ",
    "1. ",
    "  ",
    "<!--",
    "-->",
    "{code:java}",
    "{noformat}",
    "[~dana]",
    "[text|http://x.org]",
    "[docs](https://x.org/a_(b))",
    "```",
    "h2. ",
    "https://example.org/",
    "getUserById ",
    "the ",
    "Retry webhooks with jitter ",
    "hold no row lock ",
]
markup = st.lists(st.sampled_from(FRAGMENTS), max_size=80).map("".join)
PROPERTY = settings(max_examples=200, deadline=None)


def _visible(body: str) -> str:
    """The body as GitHub shows it: comments dropped, and an unterminated one hides the rest."""
    parts = re.split(r"<!--.*?-->", body, flags=re.DOTALL)
    parts[-1] = parts[-1].split("<!--")[0]
    return "".join(parts)


@PROPERTY
@given(markup)
def test_every_command_is_valid_or_names_its_problem(body: str) -> None:
    for command in commands_in(body):
        if command.problem:
            assert command.verb in ("lesson", "playbook")
        elif command.verb == "lesson":
            assert len(command.text) >= MIN_LESSON_CHARS
            assert command.text in _visible(body)
        else:
            assert command.verb in PLAYBOOK_VERBS
            assert re.fullmatch(r"pb-\d+", command.bullet_id or "")


@PROPERTY
@given(markup)
def test_no_fit_verdict_is_left_where_cites_are_read(body: str) -> None:
    assert not [c for c in commands_in(without_feedback(body)) if c.verb in FIT_VERBS]
    assert len(without_feedback(body)) <= len(body)


@PROPERTY
@given(markup)
def test_bullet_ids_are_normalised_and_mentioned(text: str) -> None:
    ids = bullet_ids(text)
    assert len(ids) == len(set(ids))
    for bullet_id in ids:
        assert re.fullmatch(r"pb-(0|[1-9]\d*)", bullet_id)
        number = bullet_id.removeprefix("pb-")
        assert re.search(rf"(?<![\w-])pb-0*{number}(?![\w-])", text, re.IGNORECASE)


@PROPERTY
@given(markup, markup, markup)
def test_linked_keys_are_upper_case_and_never_bullets(title: str, branch: str, body: str) -> None:
    links = pull_request_links(title, branch, body, "acme/shop")
    everything = f"{title}\n{branch}\n{body}".upper()
    for key in links.jira_keys:
        assert key == key.upper() and not key.startswith("PB-")
        assert re.fullmatch(r"[A-Z][A-Z0-9]+-[0-9]+", key) and key in everything
    for issue in links.closes:
        assert re.fullmatch(r"[\w.-]+/[\w.-]+#\d+", issue)


@PROPERTY
@given(markup)
def test_lessons_are_long_enough_and_written_in_the_body(body: str) -> None:
    visible = " ".join(_visible(body).split())
    for lesson in lessons_in(body):
        assert len(lesson) >= MIN_LESSON_CHARS
        assert " ".join(lesson.split()) in visible


@PROPERTY
@given(markup)
def test_tokens_are_lower_case_words_and_identifiers(text: str) -> None:
    for token in tokenize(text):
        assert token == token.lower()
        assert re.fullmatch(r"[a-z0-9_./:$#\\-]+", token)


@PROPERTY
@given(
    st.lists(st.sampled_from(sorted(STOP_WORDS)), max_size=30), st.sampled_from(" \n\t[]()<>!~|*")
)
def test_stop_words_are_never_tokens(words: list[str], between: str) -> None:
    assert tokenize(between.join(words)) == []

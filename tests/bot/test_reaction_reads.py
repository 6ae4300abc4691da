"""Reading a GitHub answer about reactions: its Link header and its items, whatever they hold."""

from __future__ import annotations

from bot.reaction_reads import _next, _reaction


def test_the_next_page_is_taken_from_the_link_header() -> None:
    link = (
        "<https://api.github.com/repositories/1/issues/comments/2/reactions?per_page=100&page=2>; "
        'rel="next", <https://api.github.com/repositories/1/issues/comments/2/reactions'
        '?per_page=100&page=3>; rel="last"'
    )
    assert _next(link) == (
        "https://api.github.com/repositories/1/issues/comments/2/reactions?per_page=100&page=2"
    )
    last = '<https://api.github.com/x?page=1>; rel="prev", <https://api.github.com/x>; rel="first"'
    assert _next(last) is None
    assert _next(None) is None and _next(7) is None


def test_an_item_in_githubs_shape_is_read_anything_else_skipped() -> None:
    item = {
        "id": 11,
        "user": {"login": "octocat", "type": "User"},
        "content": "+1",
        "created_at": "2026-11-01T10:00:00Z",
    }
    read = _reaction(item)
    assert read is not None and read.login == "octocat" and not read.is_bot and read.id == 11
    assert read.at is not None and read.at.tzinfo is not None
    assert _reaction({**item, "user": {"login": "renovate[bot]", "type": "Bot"}}).is_bot  # type: ignore[union-attr]
    for hostile in (
        None,
        [],
        {**item, "user": None},
        {**item, "user": {"login": ""}},
        {**item, "user": {"login": "x" * 101}},
        {**item, "content": None},
    ):
        assert _reaction(hostile) is None
    odd = _reaction({**item, "id": True, "created_at": "yesterday"})
    assert odd is not None and odd.id == 0 and odd.at is None

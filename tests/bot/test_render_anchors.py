"""The anchors comment: each lesson with its id, text and files, all inert in Markdown."""

from __future__ import annotations

from bot.render_anchors import NONE_ANY_MORE, anchors_comment
from playbook.anchors.pr_lessons import AnchoredLesson


def test_lessons_and_files_are_escaped_and_the_file_list_is_cut() -> None:
    lesson = AnchoredLesson(
        "pb-7",
        "Ask @alice before touching [this](https://evil.example) <img src=x>",
        tuple(f"src/@team/<b>{i}</b>[x](y).py" for i in range(5)),
    )
    body, shown = anchors_comment([lesson], max_chars=4000)
    assert shown == ["pb-7"]
    assert "@alice" not in body and "@team" not in body  # nobody is pinged
    assert "<img" not in body and "<b>" not in body
    assert "\\[this\\](https\\://" in body and "\\[x\\](y).py" in body  # no link
    assert "and 2 more" in body


def test_the_budget_leaves_lower_ranked_lessons_out() -> None:
    lessons = [AnchoredLesson(f"pb-{i}", "word " * 200, ("a.py",)) for i in range(1, 6)]
    body, shown = anchors_comment(lessons, max_chars=1200)
    assert len(body) <= 1200 and shown and len(shown) < 5
    assert shown == [f"pb-{i}" for i in range(1, len(shown) + 1)]


def test_none_any_more() -> None:
    assert anchors_comment([], max_chars=4000) == (NONE_ANY_MORE, [])


def test_a_flagged_lesson_says_so() -> None:
    body, _ = anchors_comment([AnchoredLesson("pb-1", "t", ("a.py",), stale=True)], max_chars=999)
    assert "possibly out of date" in body


def test_a_path_reads_as_itself_not_as_emphasis_or_an_entity() -> None:
    files = ("orders/__init__.py", "odd/a*b.md", "odd/c*d.md", "x&lt;y`z`~w~.md")
    body, _ = anchors_comment([AnchoredLesson("pb-1", "t", files)], max_chars=4000)
    shown = body.split("<sub>anchored to ")[1].split("</sub>")[0]
    # Each Markdown character escaped with a backslash renders as itself on GitHub.
    assert shown == ("orders/\\_\\_init\\_\\_.py, odd/a\\*b.md, odd/c\\*d.md and 1 more")
    body, _ = anchors_comment([AnchoredLesson("pb-1", "t", files[3:])], max_chars=4000)
    assert "anchored to x&amp;lt;y\\`z\\`\\~w\\~.md</sub>" in body

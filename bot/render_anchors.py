"""The anchors comment's text: the lessons anchored to a pull request's changed files."""

from __future__ import annotations

import re
from collections.abc import Sequence

from bot.render import Entry, fit_words, within_budget  # the lessons comment's, reused
from playbook.anchors.pr_lessons import AnchoredLesson
from playbook.lessons.characters import isolated
from playbook.lessons.markdown import markdown_text

HEAD = (
    "### Lessons for the files this pull request changes\n"
    "These lessons from the playbook are anchored to files this pull request changes. If one "
    "helps, cite its id in the pull request (title, description or commits), e.g. `[pb-12]`.\n\n"
)
TAIL = (
    "\n<sub>Posted by playbook-bot; it edits this comment when new commits change the files.</sub>"
)
NONE_ANY_MORE = (
    "### Lessons for the files this pull request changes\n"
    "No lesson in the playbook applies to the files this pull request changes any more."
)
# Files named per lesson; the rest are counted ("and 4 more").
FILES_SHOWN = 3
FILE_CHARS = 120
# A path is literal text, where a lesson may use emphasis: `orders/__init__.py` must not show
# as orders/**init**.py, nor `a*b.py, c*d.py` turn italic. One character per match: linear.
_EMPHASIS = re.compile(r"([*_`~])")


def _path(path: str) -> str:
    """A changed file's path as it reads, inert: escaped as lesson text is, emphasis too, and
    `&` as an entity (a file named `x&lt;y` shows as that, not as `x<y`)."""
    text = markdown_text(isolated(path[:FILE_CHARS]).replace("&", "&amp;"))
    return _EMPHASIS.sub(r"\\\1", text)


def _files(files: Sequence[str]) -> str:
    # Paths are anyone's to name (a PR's files): escaped, and cut.
    shown = [_path(path) for path in files]
    more = len(files) - FILES_SHOWN
    return ", ".join(shown[:FILES_SHOWN]) + (f" and {more} more" if more > 0 else "")


def _why(lesson: AnchoredLesson) -> str:
    parts = [f"anchored to {_files(lesson.files)}"]
    fit = fit_words(lesson.hit) if lesson.hit is not None else None
    if fit:
        parts.append(markdown_text(fit))
    if lesson.stale:
        parts.append("flagged as possibly out of date")
    return " · ".join(parts)


def anchors_comment(lessons: Sequence[AnchoredLesson], *, max_chars: int) -> tuple[str, list[str]]:
    """The comment listing ``lessons`` within ``max_chars``; returns it and the ids it shows.

    No lesson: the note that none applies any more (a first comment is never that note).
    """
    if not lessons:
        return NONE_ANY_MORE, []
    entries = [
        Entry(
            lesson.bullet_id,
            f"- **[{lesson.bullet_id}]** {{text}}\n  <sub>{_why(lesson)}</sub>\n",
            lesson.text,
            markdown_text,
        )
        for lesson in lessons
    ]
    lines, shown = within_budget(entries, max_chars - len(HEAD) - len(TAIL))
    return HEAD + "".join(lines) + TAIL, shown

"""Comment text: the lessons for a ticket in GitHub Markdown or Jira wiki markup."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from playbook.anchors.detail import files_gone
from playbook.lessons.characters import FSI, PDI, isolated, right_to_left, visible
from playbook.lessons.markdown import markdown_text
from playbook.search.relevance import strength
from playbook.search.retrieval import Hit

# One character per match and no repetition, so escaping runs in linear time on any lesson text.
_WIKI_SPECIAL = re.compile(r"([\\{}\[\]|*_^~+!#-])")


def fit_words(hit: Hit) -> str | None:
    """How well a lesson fits, in words, and the ticket's words it matched; never a number.

    "possible fit: matched deadlocks, handler". None when the search made no estimate.
    """
    if hit.relevance is None:
        return None
    words = strength(hit.relevance, 0.0)
    matched = ", ".join(isolated(word) for word in hit.matched)
    return f"{words} fit: matched {matched}" if matched else f"{words} fit"


def reason(hit: Hit) -> str:
    """One line on why a lesson is here, where it comes from and how it has done."""
    source = isolated(hit.learned_from) if hit.learned_from else ""
    fit = fit_words(hit)
    parts = [f"learned from {source}" if source else "no source ticket"]
    if hit.cites_success or hit.cites_failure:
        outcomes = []
        if hit.cites_success:
            outcomes.append(f"{hit.cites_success} merged PR{'s' if hit.cites_success != 1 else ''}")
        if hit.cites_failure:
            outcomes.append(f"{hit.cites_failure} unmerged")
        parts.append("cited in " + ", ".join(outcomes))
    elif hit.cites:
        parts.append(f"cited {hit.cites} time{'s' if hit.cites != 1 else ''}")
    else:
        parts.append("not cited yet")
    gone = files_gone(hit.stale_detail)
    if gone:
        # Flagged, not yet looked at by a maintainer: the reader weighs the lesson knowing it.
        parts.insert(0, f"⚠ the files it is about were removed in {isolated(gone)}")
    history = ", ".join(parts)
    # The fit first, set apart: its matched words are a list of their own.
    return f"{fit} · {history}" if fit else history


def _wiki_text(text: str) -> str:
    # [ { | * _ start links, macros, tables and emphasis in wiki markup; escape them all.
    return _WIKI_SPECIAL.sub(r"\\\1", text.replace("\n", " "))


def _shorten(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: max(limit - 1, 0)].rstrip() + "…"


def _lesson_text(text: str, escape: Callable[[str], str], limit: int) -> str:
    """A lesson's text as a comment shows it: visible, escaped, shortened and isolated.

    Stored text is already visible (`fields.text`); made so again here for rows written
    before that rule. Right-to-left text is wrapped in an isolate (`characters.isolated`)
    after it is cut, so the cut never drops the isolate's end and lets the direction leak.
    """
    # Not `isolated(escaped)`: that would drop the zero-width space escaping puts after "@".
    escaped = escape(visible(text))
    if not right_to_left(escaped):
        return _shorten(escaped, limit)
    return f"{FSI}{_shorten(escaped, limit - 2)}{PDI}"


def lessons_comment(hits: Sequence[Hit], *, markup: str, max_chars: int) -> tuple[str, list[str]]:
    """The comment listing ``hits`` within ``max_chars``; returns it and the ids it shows."""
    if markup == "jira":
        head = (
            "h4. Lessons from the playbook\n"
            "These lessons from earlier work may help with this ticket. If one helps, cite its "
            "id in the pull request (title, description or commits), e.g. \\[pb-12\\].\n\n"
        )
        tail = "\n_Posted by playbook-bot; it edits this comment when the ticket changes._"
    else:
        head = (
            "### Lessons from the playbook\n"
            "These lessons from earlier work may help with this ticket. If one helps, cite its "
            "id in the pull request (title, description or commits), e.g. `[pb-12]`.\n\n"
        )
        tail = "\n<sub>Posted by playbook-bot; it edits this comment when the ticket changes.</sub>"
    entries = []
    for hit in hits:
        why = reason(hit)
        if markup == "jira":
            line = f"* *\\[{hit.bullet_id}\\]* {{text}}\n** _{_wiki_text(why)}_\n"
            entries.append(Entry(hit.bullet_id, line, hit.text, _wiki_text))
        else:
            line = f"- **[{hit.bullet_id}]** {{text}}\n  <sub>{markdown_text(why)}</sub>\n"
            entries.append(Entry(hit.bullet_id, line, hit.text, markdown_text))
    lines, shown = within_budget(entries, max_chars - len(head) - len(tail))
    return head + "".join(lines) + tail, shown


@dataclass(frozen=True)
class Entry:
    """One lesson's line of a comment: ``line`` holds ``{text}`` where its text goes."""

    bullet_id: str
    line: str
    text: str
    escape: Callable[[str], str]


def within_budget(entries: Sequence[Entry], budget: int) -> tuple[list[str], list[str]]:
    """The lines that fit ``budget`` characters, in order, each text shortened to its room, and
    the ids they show; a lesson with no room for a useful excerpt ends the list."""
    lines: list[str] = []
    shown: list[str] = []
    for entry in entries:
        room = budget - len(entry.line) + len("{text}")
        if room < 40:
            break  # not even a useful excerpt fits; lower-ranked lessons are left out
        line = entry.line.replace("{text}", _lesson_text(entry.text, entry.escape, min(room, 600)))
        lines.append(line)
        shown.append(entry.bullet_id)
        budget -= len(line)
    return lines, shown


def no_lessons_comment(markup: str, *, first: bool = False) -> str:
    """What the bot's comment says when no lesson fits: once the edited ticket lost its fit,
    or, with `PLAYBOOK_SAY_NOTHING_FITS`, the one line on a ticket nothing ever fitted."""
    text = (
        "Nothing in the playbook fits this ticket yet."
        if first
        else "No lesson in the playbook fits this ticket any more."
    )
    if markup == "jira":
        return f"h4. Lessons from the playbook\n{text}"
    return f"### Lessons from the playbook\n{text}"

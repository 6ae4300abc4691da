"""Key terms of a lesson, and those of a group's members that a merged text leaves out."""

from __future__ import annotations

from collections.abc import Collection, Mapping

from playbook.consolidation.groups import terms
from playbook.lessons.ids import sort_key

# Punctuation around a word as written ("retry," "(idempotency)") is not part of the word.
_EDGES = ".,;:!?()[]{}<>\"'`*_~|/\\"


def _written(text: str) -> dict[str, str]:
    """Each compared term of ``text`` with the word it was first written as (lower case)."""
    found: dict[str, str] = {}
    for word in text.split():
        shown = word.strip(_EDGES).lower()
        for term in terms(word):
            found.setdefault(term, shown or term)
    return found


def key_terms(text: str, common: Collection[str] = ()) -> list[str]:
    """A lesson's distinctive words, as written, in order: what a merged text must keep.

    Words are compared by stem (`groups.terms`: "retries" and "retrying" are one), without
    stop words, ticket keys, lesson ids and numbers, and without ``common``: the stems most
    lessons of the scope share (`groups.common_terms`), its boilerplate.
    """
    shown = (word for term, word in _written(text).items() if term not in common)
    return list(dict.fromkeys(shown))


def dropped_terms(
    members: Mapping[str, str], draft: str, common: Collection[str] = ()
) -> dict[str, list[str]]:
    """For each member (id -> text), its key terms the draft lacks; {} when none is missing.

    A draft that writes a word in another form ("retried" for "retry") keeps it.
    """
    kept = set(terms(draft))
    missing: dict[str, list[str]] = {}
    for bullet_id in sorted(members, key=sort_key):
        lost = list(
            dict.fromkeys(
                shown
                for term, shown in _written(members[bullet_id]).items()
                if term not in common and term not in kept
            )
        )
        if lost:
            missing[bullet_id] = lost
    return missing

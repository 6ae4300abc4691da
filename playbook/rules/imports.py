"""Importing a team's rule files as lessons: a plan (add, near-duplicate, skip), then its writes."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from sqlalchemy import select
from sqlalchemy.orm import Session

from playbook.lessons import checks, fields, lifecycle
from playbook.lessons.fields import FieldProblem
from playbook.models import Bullet
from playbook.rules.parse import Item

SOURCE = "rules"
STATUSES = ("proposed", "active")
# What each planned entry will do: be added, or not (and why not).
ADD, DUPLICATE, REPEAT, RETIRED, INVALID = "add", "duplicate", "repeat", "retired", "invalid"
_LIVE = ("active", "proposed")


@dataclass(frozen=True)
class RuleSource:
    """One parsed rule file: its name for people, its items and its provenance."""

    name: str
    items: Sequence[Item]
    learned_from: str
    source_url: str | None = None


@dataclass
class Entry:
    """One item of the import and what happens to it.

    ``outcome`` is ADD; DUPLICATE (of the live lesson ``duplicate_of``, ``overlap`` of its
    words); REPEAT (of an earlier item of this import, ``duplicate_of`` = ``file:line``);
    RETIRED (the same text as a deprecated or archived lesson: a maintainer said no once);
    or INVALID (``problem`` is the field check's sentence).
    """

    source: RuleSource
    item: Item
    outcome: str
    duplicate_of: str | None = None
    overlap: float = 0.0
    problem: str | None = None
    bullet_id: str | None = None  # set when applied

    @property
    def where(self) -> str:
        """``file:line`` of the item."""
        return f"{self.source.name}:{self.item.line}"


@dataclass
class Plan:
    """Every item of an import in order, with its outcome; nothing written yet."""

    scope: str
    status: str
    entries: list[Entry] = field(default_factory=list)

    def of(self, *outcomes: str) -> list[Entry]:
        """The entries with one of ``outcomes``."""
        return [entry for entry in self.entries if entry.outcome in outcomes]


def check_target(scope: str, status: str) -> tuple[str, str]:
    """The import's scope and status checked (FieldProblem names the bad one)."""
    checked = checks.check_fields({"scope": scope})
    return checked["scope"], checks.check_status(status, STATUSES)


class _Seen:
    """Texts planned so far, to find an item near-duplicating an earlier one of the import.

    A text sharing DUPLICATE_OVERLAP of the larger word set holds one of any that many-plus-
    one of ``text``'s words, so only the rarest few are looked up (a prefix filter), and
    the word sets are kept: a big file is not compared pair by pair, nor split into words
    again for every comparison. `lifecycle.word_overlap` has the last word.
    """

    def __init__(self) -> None:
        self.entries: list[tuple[Entry, frozenset[str]]] = []
        self.postings: dict[str, list[int]] = {}

    def add(self, entry: Entry) -> None:
        position = len(self.entries)
        words = frozenset(lifecycle.overlap_words(entry.item.text))
        self.entries.append((entry, words))
        for word in words:
            self.postings.setdefault(word, []).append(position)

    def near(self, text: str) -> tuple[Entry, float] | None:
        words = lifecycle.overlap_words(text)
        if not words or not self.entries:
            return None
        probe = int(len(words) * (1 - lifecycle.DUPLICATE_OVERLAP)) + 2
        rarest = sorted(words, key=lambda word: len(self.postings.get(word, ())))
        candidates = sorted({i for word in rarest[:probe] for i in self.postings.get(word, ())})
        best: tuple[Entry, float] | None = None
        for i in candidates:
            earlier, other = self.entries[i]
            shared = len(words & other) / max(len(words), len(other))
            if shared < lifecycle.DUPLICATE_OVERLAP or (best is not None and shared <= best[1]):
                continue
            overlap = lifecycle.word_overlap(text, earlier.item.text)
            if overlap >= lifecycle.DUPLICATE_OVERLAP and (best is None or overlap > best[1]):
                best = (earlier, overlap)
        return best


def _retired(session: Session, scope: str) -> dict[str, str]:
    """Texts of the scope's deprecated and archived lessons, to their ids."""
    rows = session.execute(
        select(Bullet.id, Bullet.text).where(Bullet.scope == scope, Bullet.status.not_in(_LIVE))
    )
    return {text: bullet_id for bullet_id, text in rows}


def plan(
    session: Session,
    sources: Sequence[RuleSource],
    *,
    scope: str = "global",
    status: str = "proposed",
    max_chars: int = fields.MAX_LESSON_CHARS,
) -> Plan:
    """What importing ``sources`` into ``scope`` would do, item by item; writes nothing.

    An item is added unless it near-duplicates a live lesson of the scope
    (`lifecycle.find_near_duplicate`) or an earlier item of this import (the same overlap
    rule), repeats a lesson the scope retired, or fails a field check.
    """
    scope, status = check_target(scope, status)
    result = Plan(scope=scope, status=status)
    retired = _retired(session, scope)
    seen = _Seen()
    for source in sources:
        for item in source.items:
            entry = Entry(source, item, ADD)
            result.entries.append(entry)
            try:
                text = _checked(source, item, scope, max_chars)["text"]
            except FieldProblem as problem:
                entry.outcome, entry.problem = INVALID, str(problem)
                continue
            if text in retired:
                entry.outcome, entry.duplicate_of = RETIRED, retired[text]
                continue
            earlier = seen.near(text)
            if earlier is not None:
                entry.outcome, entry.duplicate_of = REPEAT, earlier[0].where
                entry.overlap = earlier[1]
                continue
            found = lifecycle.find_near_duplicate(session, text, scope)
            if found is not None:
                entry.outcome, entry.duplicate_of = DUPLICATE, found[0].id
                entry.overlap = found[1]
                continue
            seen.add(entry)
    return result


def _checked(source: RuleSource, item: Item, scope: str, max_chars: int) -> dict[str, object]:
    """The fields `lifecycle.add` will write, checked as it will check them."""
    return checks.check_fields(
        {
            "text": item.text,
            "learned_from": source.learned_from,
            "tags": list(item.tags),
            "scope": scope,
            "source": SOURCE,
            "source_url": source.source_url,
        },
        max_chars=max_chars,
    )


def apply(
    session: Session,
    planned: Plan,
    *,
    actor: str,
    max_chars: int = fields.MAX_LESSON_CHARS,
) -> Plan:
    """Add the planned lessons in the caller's transaction; ``planned`` is updated and returned.

    A lesson written meanwhile that near-duplicates an entry turns it into a DUPLICATE; a
    field the checks refuse turns it into INVALID, and the others are still added.
    """
    for entry in planned.of(ADD):
        source, item = entry.source, entry.item
        try:
            added = lifecycle.add(
                session,
                item.text,
                learned_from=source.learned_from,
                actor=actor,
                tags=list(item.tags),
                scope=planned.scope,
                status=planned.status,
                source=SOURCE,
                source_url=source.source_url,
                reason=f"imported from {source.name}",
                max_chars=max_chars,
            )
        except FieldProblem as problem:
            entry.outcome, entry.problem = INVALID, str(problem)
            continue
        if added.created:
            entry.bullet_id = added.bullet.id
        else:
            entry.outcome, entry.duplicate_of = DUPLICATE, added.bullet.id
            entry.overlap = added.overlap
    return planned

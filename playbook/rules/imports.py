"""Importing a team's rule files as lessons: a plan (add, near-duplicate, skip), then its writes."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import combinations

from sqlalchemy import func, insert, select
from sqlalchemy.orm import Session

from playbook import clock
from playbook.lessons import checks, fields, lifecycle, secrets
from playbook.lessons.fields import FieldProblem
from playbook.models import Bullet, Revision
from playbook.rules.parse import Item
from playbook.version import bump_version

SOURCE = "rules"
STATUSES = ("proposed", "active")
# What each planned entry will do: be added, or not (and why not).
ADD, DUPLICATE, REPEAT, RETIRED, INVALID = "add", "duplicate", "repeat", "retired", "invalid"
_LIVE = ("active", "proposed")
# The fields of an item other than its text: its file's provenance and its own tags.
_FixedKey = tuple[str, str | None, tuple[str, ...], tuple[str, ...] | None]
# Rows per INSERT of an import's lessons and revisions.
_CHUNK = 2_000


@dataclass(frozen=True)
class RuleSource:
    """One parsed rule file: its name for people, its items and its provenance."""

    name: str
    items: Sequence[Item]
    learned_from: str
    source_url: str | None = None
    # What its lessons are about (`playbook.rules.anchors`): globs, or None.
    paths: tuple[str, ...] | None = None


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
    # The checked fields to write, and the words compared (set for entries to add).
    values: dict[str, object] | None = field(default=None, repr=False)
    words: frozenset[str] = field(default=frozenset(), repr=False)

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
    # How many items of the import hold each word: the order `_Index` looks words up in.
    frequency: dict[str, int] = field(default_factory=dict, repr=False)
    # The highest `pb-<n>` when the scope was read: lessons above it were written since.
    highest: int = 0

    def of(self, *outcomes: str) -> list[Entry]:
        """The entries with one of ``outcomes``."""
        return [entry for entry in self.entries if entry.outcome in outcomes]


def check_target(scope: str, status: str) -> tuple[str, str]:
    """The import's scope and status checked (FieldProblem names the bad one)."""
    checked = checks.check_fields({"scope": scope})
    return checked["scope"], checks.check_status(status, STATUSES)


class _Index:
    """Word sets of lessons or items, to find the one a text near-duplicates without comparing
    every pair: a file of 100k items costs a pass, not 100k queries and 5 billion pairs.

    A text A near-duplicates B when they share DUPLICATE_OVERLAP of the larger word set, so
    at least `_need(|B|)` of B's words, and their sizes differ by that ratio at most. Exact,
    by three lookups, each finding every pair it is used for:

    - under four words (`_FEWEST_LOOKED_UP`) only the same set of words shares that much:
      a dictionary of sets;
    - a set of up to `_SUBSETS_UP_TO` words is indexed under each of its subsets of
      `_need(|B|)` words (a few dozen), and a text whose partners are all that short looks
      up its own subsets of those sizes: only real partners come back, whatever the words;
    - every set is also indexed under the first words of a prefix filter (in ``order``,
      a file's rarest words first): a longer text and its partner both hold the first word
      they share among their first `len - _need(len) + 1` words.
    """

    def __init__(self, order: dict[str, int]) -> None:
        self.order = order
        self.keys: list[str] = []
        self.words: list[frozenset[str]] = []
        self.same: dict[frozenset[str], int] = {}
        self.subsets: dict[tuple[str, ...], list[int]] = {}
        self.postings: dict[str, list[int]] = {}

    def prefix(self, words: frozenset[str]) -> list[str]:
        """The first words of ``words`` in the index's order that a near-duplicate must meet."""
        if len(words) < _FEWEST_LOOKED_UP:
            return []
        ranked = sorted(words, key=lambda word: (self.order.get(word, 0), word))
        return ranked[: len(words) - _need(len(words)) + 1]

    def add(self, key: str, words: frozenset[str], prefix: list[str] | None = None) -> None:
        """Index ``words`` under ``key``; a tie goes to the key added first."""
        position = len(self.keys)
        self.keys.append(key)
        self.words.append(words)
        self.same.setdefault(words, position)
        size = len(words)
        if _FEWEST_LOOKED_UP <= size <= _SUBSETS_UP_TO:
            for subset in combinations(sorted(words), _need(size)):
                self.subsets.setdefault(subset, []).append(position)
        for word in self.prefix(words) if prefix is None else prefix:
            self.postings.setdefault(word, []).append(position)

    def near(
        self, words: frozenset[str], prefix: list[str] | None = None
    ) -> tuple[str, float] | None:
        """The key whose words ``words`` near-duplicates most (the first on a tie), or None."""
        if not words:
            return None
        same = self.same.get(words)
        if same is not None:
            return self.keys[same], 1.0  # the most any overlap is, and the first such key
        size = len(words)
        if size < _FEWEST_LOOKED_UP:
            return None
        partners = _partner_sizes(size)
        if partners[-1] <= _SUBSETS_UP_TO:
            ordered = sorted(words)
            found = {
                i
                for shared in sorted({_need(other) for other in partners if _need(other) <= size})
                for subset in combinations(ordered, shared)
                for i in self.subsets.get(subset, ())
            }
        else:
            looked_up = self.prefix(words) if prefix is None else prefix
            found = {i for word in looked_up for i in self.postings.get(word, ())}
        best: tuple[str, float] | None = None
        for i in sorted(found):
            other = self.words[i]
            overlap = len(words & other) / max(size, len(other))
            if overlap >= lifecycle.DUPLICATE_OVERLAP and (best is None or overlap > best[1]):
                best = (self.keys[i], overlap)
        return best


def _partner_sizes(size: int) -> list[int]:
    """The sizes of word sets a set of ``size`` words may near-duplicate (ascending)."""
    low = max(1, int(size * lifecycle.DUPLICATE_OVERLAP) - 1)
    high = int(size / lifecycle.DUPLICATE_OVERLAP) + 2 if lifecycle.DUPLICATE_OVERLAP else size
    return [
        other
        for other in range(low, high + 1)
        if min(size, other) / max(size, other) >= lifecycle.DUPLICATE_OVERLAP
    ]


def _need(count: int) -> int:
    """The fewest words of ``count`` that a near-duplicate shares (the overlap's own float
    arithmetic, so that the filter and `lifecycle.word_overlap` never disagree)."""
    return next(
        (shared for shared in range(count + 1) if shared / count >= lifecycle.DUPLICATE_OVERLAP),
        count,
    )


def _fewest_looked_up() -> int:
    """The fewest words a text has that near-duplicates a text of other words: a words
    sharing DUPLICATE_OVERLAP of a + 1. Smaller sets (and those they would meet) can only
    share enough with the same set, since any other set of theirs misses one word of few."""
    count = 1
    while count < _MAX_WORDS and count / (count + 1) < lifecycle.DUPLICATE_OVERLAP:
        count += 1
    return count


_MAX_WORDS = 10_000
_FEWEST_LOOKED_UP = _fewest_looked_up()
# Sets of up to this many words are indexed by their subsets: C(12, 2) = 66 keys at most.
_SUBSETS_UP_TO = 12


def _retired(session: Session, scope: str) -> dict[str, str]:
    """Texts of the scope's deprecated and archived lessons, to their ids."""
    rows = session.execute(
        select(Bullet.id, Bullet.text).where(Bullet.scope == scope, Bullet.status.not_in(_LIVE))
    )
    return {text: bullet_id for bullet_id, text in rows}


def _live(session: Session, scope: str, order: dict[str, int], above: int = 0) -> _Index:
    """The scope's live lessons (numbered above ``above``), indexed by their words.

    Added in `lifecycle.closest_live`'s order (by id as text), so a tie goes where `add`
    would send it.
    """
    query = select(Bullet.id, Bullet.text).where(Bullet.scope == scope, Bullet.status.in_(_LIVE))
    if above:
        query = query.where(Bullet.number > above)
    index = _Index(order)
    for bullet_id, text in sorted(session.execute(query)):
        index.add(bullet_id, frozenset(lifecycle.overlap_words(text)))
    return index


def plan(
    session: Session,
    sources: Sequence[RuleSource],
    *,
    scope: str = "global",
    status: str = "proposed",
    max_chars: int = fields.MAX_LESSON_CHARS,
) -> Plan:
    """What importing ``sources`` into ``scope`` would do, item by item; writes nothing.

    An item is added unless it near-duplicates a live lesson of the scope (the overlap
    rule of `lifecycle.find_near_duplicate`) or an earlier item of this import (the same
    rule), repeats a lesson the scope retired, or fails a field check. One pass over the
    items and one read of the scope, whatever the size of the file (see `_Index`).
    """
    scope, status = check_target(scope, status)
    result = Plan(scope=scope, status=status)
    retired = _retired(session, scope)
    result.highest = session.scalar(select(func.max(Bullet.number))) or 0
    checked: list[tuple[Entry, str, frozenset[str]]] = []
    fixed: dict[_FixedKey, dict[str, object] | FieldProblem] = {}
    # One set-up of the credential scanner for the whole file, not one per item.
    with secrets.scanning():
        for source in sources:
            for item in source.items:
                entry = Entry(source, item, ADD)
                result.entries.append(entry)
                try:
                    values = _checked(source, item, scope, max_chars, fixed)
                except FieldProblem as problem:
                    entry.outcome, entry.problem = INVALID, str(problem)
                    continue
                entry.values = values
                text = str(values["text"])
                checked.append((entry, text, frozenset(lifecycle.overlap_words(text))))
    # Rarest first: a word in few items of the file is the cheapest to look up.
    frequency: dict[str, int] = {}
    for _, _, words in checked:
        for word in words:
            frequency[word] = frequency.get(word, 0) + 1
    live = _live(session, scope, frequency)
    seen = _Index(frequency)
    by_where: dict[str, Entry] = {}
    for entry, text, words in checked:
        if text in retired:
            entry.outcome, entry.duplicate_of = RETIRED, retired[text]
            continue
        prefix = seen.prefix(words)  # the same order in both indexes
        earlier = seen.near(words, prefix)
        if earlier is not None:
            entry.outcome, entry.duplicate_of = REPEAT, by_where[earlier[0]].where
            entry.overlap = earlier[1]
            continue
        found = live.near(words, prefix)
        if found is not None:
            entry.outcome, entry.duplicate_of = DUPLICATE, found[0]
            entry.overlap = found[1]
            continue
        key = str(len(by_where))
        by_where[key] = entry
        seen.add(key, words, prefix)
        entry.words = words
    result.frequency = frequency
    return result


def _checked(
    source: RuleSource,
    item: Item,
    scope: str,
    max_chars: int,
    fixed: dict[_FixedKey, dict[str, object] | FieldProblem],
) -> dict[str, object]:
    """The fields `lifecycle.add` would write, checked as it checks them (FieldProblem names
    the first bad one, in its order: the text, then the rest).

    The text is checked per item; the other fields, the same for most items of a file
    (its provenance, the scope, its anchors, a few sets of tags), once per distinct set in
    ``fixed``.
    """
    text = checks.check_fields({"text": item.text}, max_chars=max_chars)["text"]
    key = (source.learned_from, source.source_url, tuple(item.tags), source.paths)
    if key not in fixed:
        try:
            fixed[key] = checks.check_fields(
                {
                    "learned_from": source.learned_from,
                    "tags": list(item.tags),
                    "scope": scope,
                    "source": SOURCE,
                    "source_url": source.source_url,
                    "paths": list(source.paths) if source.paths else None,
                }
            )
        except FieldProblem as problem:
            fixed[key] = problem
    rest = fixed[key]
    if isinstance(rest, FieldProblem):
        raise rest.with_traceback(None)
    return {"text": text, **rest}


def apply(
    session: Session,
    planned: Plan,
    *,
    actor: str,
    max_chars: int = fields.MAX_LESSON_CHARS,
) -> Plan:
    """Add the planned lessons in the caller's transaction; ``planned`` is updated and returned.

    What `lifecycle.add` does for each, at once: the version is bumped first (on PostgreSQL
    its row lock queues other writers of lessons), a lesson written since the plan that an
    entry near-duplicates turns it into a DUPLICATE, and each lesson is created with the
    next `pb-<n>` and its "create" revision, in multi-row INSERTs. ``max_chars`` was applied
    by `plan`, whose checked fields are written.
    """
    adding = [entry for entry in planned.of(ADD) if entry.values is not None]
    if not adding:
        return planned
    version = bump_version(session)  # taken before the re-check: nothing slips in after it
    highest_now = session.scalar(select(func.max(Bullet.number))) or 0
    if highest_now > planned.highest:
        newer = _live(session, planned.scope, planned.frequency, above=planned.highest)
        for entry in adding:
            found = newer.near(entry.words)
            if found is not None:
                entry.outcome, entry.duplicate_of, entry.overlap = DUPLICATE, found[0], found[1]
        adding = [entry for entry in adding if entry.outcome == ADD]
    now = clock.now()
    bullets: list[dict[str, object]] = []
    revisions: list[dict[str, object]] = []
    for number, entry in enumerate(adding, start=highest_now + 1):
        values = entry.values or {}
        entry.bullet_id = f"pb-{number}"
        row = {
            "id": entry.bullet_id,
            "number": number,
            "text": values["text"],
            "section": "best_practice",
            "tags": list(values.get("tags") or []),  # type: ignore[call-overload]
            "scope": planned.scope,
            "learned_from": values.get("learned_from"),
            "source": values.get("source"),
            "source_url": values.get("source_url"),
            "status": planned.status,
            "demoted_on": None,
            "demoted_reason": None,
            "superseded_by": None,
            # Anchors, when the rule's file gave some (`paths`); revisions record them.
            "paths": values.get("paths"),
            "symbols": values.get("symbols"),
            "created_at": now,
            "updated_at": now,
            "loads": 0,
            "cites": 0,
            "cites_success": 0,
            "cites_failure": 0,
            "version": version,
        }
        bullets.append(row)
        revisions.append(
            {
                "bullet_id": entry.bullet_id,
                "action": "create",
                "actor": actor,
                "at": now,
                "reason": f"imported from {entry.source.name}",
                "before": None,
                "after": {key: row[key] for key in lifecycle.SNAPSHOT_FIELDS},
            }
        )
    for start in range(0, len(bullets), _CHUNK):
        session.execute(insert(Bullet.__table__), bullets[start : start + _CHUNK])
        session.execute(insert(Revision.__table__), revisions[start : start + _CHUNK])
    # Past the import's version, as `bulk.put_many` does: the next near-duplicate shortlist
    # reads the lessons of the current version once, not this whole import on every call.
    bump_version(session)
    _tell_listeners(session, [row["id"] for row in bullets])
    return planned


def _tell_listeners(session: Session, ids: Sequence[object]) -> None:
    """Tell `lifecycle.change_listeners` of each lesson created, as `add` does (the bot queues
    an active lesson's embedding job); nothing is loaded when no one listens."""
    if not lifecycle.change_listeners:
        return
    for start in range(0, len(ids), _CHUNK):
        chunk = [str(bullet_id) for bullet_id in ids[start : start + _CHUNK]]
        for bullet in session.scalars(select(Bullet).where(Bullet.id.in_(chunk))):
            for listener in lifecycle.change_listeners:
                listener(session, bullet)

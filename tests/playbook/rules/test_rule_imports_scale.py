"""A big import plans exactly what checking its items one by one would: the same outcome, the
same near-duplicate named, the same problem, for every item of a 3,000-item file."""

from __future__ import annotations

import random

from sqlalchemy import Engine, func, select

from playbook.db import transaction
from playbook.lessons import checks, lifecycle
from playbook.lessons.fields import FieldProblem
from playbook.models import Bullet, Revision
from playbook.rules import imports
from playbook.rules.imports import RuleSource
from playbook.rules.parse import Item
from tests.secret_samples import SAMPLES
from tests.support import hang_guard

SCOPE = "acme/api"
MAX_CHARS = 120
_WORDS = [
    a + b + c for a in "bdfgklmnprstvz" for b in "aeiou" for c in "bdgklmnprstx"
]  # 840 made-up words


def items(count: int, seed: int = 5) -> tuple[list[str], list[str], list[str]]:
    """``count`` item texts of every kind an import meets, the texts of live lessons stored in
    the scope beforehand, and those of lessons it retired."""
    rng = random.Random(seed)
    stored = [" ".join(rng.sample(_WORDS, rng.randint(4, 9))) for _ in range(150)]
    retired = [" ".join(rng.sample(_WORDS, 5)) for _ in range(20)]
    texts: list[str] = []
    while len(texts) < count:
        roll = rng.random()
        if roll < 0.45 or not texts:
            texts.append(" ".join(rng.sample(_WORDS, rng.choice((2, 2, 3, 4, 5, 6, 8, 12)))))
        elif roll < 0.55:
            texts.append(rng.choice(texts))  # the same item again
        elif roll < 0.7:
            words = rng.choice(texts).split()
            if len(words) > 4:
                del words[rng.randrange(len(words))]  # one word dropped
            words.insert(rng.randrange(len(words) + 1), rng.choice(_WORDS))  # one added
            rng.shuffle(words)
            texts.append(" ".join(words))
        elif roll < 0.8:
            words = rng.choice(stored).split()
            words[rng.randrange(len(words))] = rng.choice(_WORDS)  # a stored lesson, reworded
            texts.append(" ".join(words) if rng.random() < 0.7 else " ".join(reversed(words)))
        elif roll < 0.85:
            texts.append(rng.choice(retired))
        elif roll < 0.9:
            texts.append(rng.choice(SAMPLES).text.replace("\n", " "))  # refused: a credential
        elif roll < 0.95:
            texts.append(" ".join(rng.choices(_WORDS, k=40)))  # refused: too long
        else:
            texts.append(f"{rng.choice(_WORDS)} -- {rng.choice(_WORDS).upper()}!")
    return texts, stored, retired


def seed(engine: Engine, stored: list[str], retired: list[str]) -> None:
    with transaction(engine) as session:
        for text in stored:
            lifecycle.add(session, text, learned_from="CTMS-1", actor="t", scope=SCOPE)
            # The same words in another scope never make an item of this one a duplicate.
            lifecycle.add(session, text, learned_from="CTMS-1", actor="t", scope="other")
        for text in retired:
            added = lifecycle.add(session, text, learned_from="CTMS-1", actor="t", scope=SCOPE)
            lifecycle.deprecate(session, added.bullet.id, actor="t", reason="no")


def one_by_one(engine: Engine, source: RuleSource) -> list[tuple[str, str | None, str | None]]:
    """What each item's outcome is when checked alone, as `add` checks: every field, the
    scope's retired texts, each earlier item of the import, then the stored lessons."""
    outcomes: list[tuple[str, str | None, str | None]] = []
    kept: list[tuple[str, set[str]]] = []  # (where, words) of the items to add, in order
    with transaction(engine) as session:
        retired = dict(
            session.execute(
                select(Bullet.text, Bullet.id).where(
                    Bullet.scope == SCOPE, Bullet.status.not_in(("active", "proposed"))
                )
            ).all()
        )
        for item in source.items:
            try:
                text = checks.check_fields(
                    {
                        "text": item.text,
                        "learned_from": source.learned_from,
                        "tags": list(item.tags),
                        "scope": SCOPE,
                        "source": imports.SOURCE,
                        "source_url": source.source_url,
                    },
                    max_chars=MAX_CHARS,
                )["text"]
            except FieldProblem as problem:
                outcomes.append((imports.INVALID, None, str(problem)))
                continue
            if text in retired:
                outcomes.append((imports.RETIRED, retired[text], None))
                continue
            words = lifecycle.overlap_words(text)
            best: tuple[str, float] | None = None
            for where, other in kept:
                overlap = len(words & other) / max(len(words), len(other)) if words else 0.0
                if overlap >= lifecycle.DUPLICATE_OVERLAP and (best is None or overlap > best[1]):
                    best = (where, overlap)
            if best is not None:
                outcomes.append((imports.REPEAT, best[0], None))
                continue
            found = lifecycle.find_near_duplicate(session, text, SCOPE)
            if found is not None:
                outcomes.append((imports.DUPLICATE, found[0].id, None))
                continue
            kept.append((f"{source.name}:{item.line}", words))
            outcomes.append((imports.ADD, None, None))
        session.rollback()
    return outcomes


def test_a_big_import_plans_what_one_by_one_checks_would(engine: Engine) -> None:
    texts, stored, retired = items(3_000)
    seed(engine, stored, retired)
    tags = (("style",), ("style", "tests"), ())
    source = RuleSource(
        "AGENTS.md",
        [Item(text, tags[line % 3], line) for line, text in enumerate(texts, start=1)],
        "AGENTS.md@2026-11-02",
        source_url="AGENTS.md",
    )
    expected = one_by_one(engine, source)

    with hang_guard(300, "planning 3,000 items"), transaction(engine) as session:
        planned = imports.plan(session, [source], scope=SCOPE, max_chars=MAX_CHARS)
        got = [(e.outcome, e.duplicate_of, e.problem) for e in planned.entries]
        before = session.scalar(select(func.max(Bullet.number))) or 0
        imports.apply(session, planned, actor="alice", max_chars=MAX_CHARS)

    assert got == expected
    kinds = {outcome for outcome, _, _ in got}
    assert kinds == {imports.ADD, imports.REPEAT, imports.DUPLICATE, imports.RETIRED, "invalid"}
    added = planned.of(imports.ADD)
    assert [e.bullet_id for e in added] == [f"pb-{before + n}" for n in range(1, len(added) + 1)]
    with transaction(engine) as session:
        rows = session.execute(
            select(Bullet.id, Bullet.text, Bullet.status, Bullet.tags).where(
                Bullet.id.in_([e.bullet_id for e in added])
            )
        ).all()
        revisions = session.scalar(
            select(func.count())
            .select_from(Revision)
            .where(Revision.action == "create", Revision.reason == "imported from AGENTS.md")
        )
    assert len(rows) == len(added) == revisions
    stored_as = {bullet_id: (text, status, tags) for bullet_id, text, status, tags in rows}
    for entry in added:
        assert stored_as[entry.bullet_id] == (entry.item.text, "proposed", list(entry.item.tags))


def test_the_same_import_again_adds_nothing(engine: Engine) -> None:
    texts, _, _ = items(1_000, seed=8)
    source = RuleSource(
        "AGENTS.md",
        [Item(text, (), line) for line, text in enumerate(texts, start=1)],
        "AGENTS.md@2026-11-02",
    )
    with transaction(engine) as session:
        first = imports.apply(
            session, imports.plan(session, [source], max_chars=MAX_CHARS), actor="a"
        )
    with transaction(engine) as session:
        again = imports.plan(session, [source], max_chars=MAX_CHARS)
    assert first.of(imports.ADD)
    assert again.of(imports.ADD) == []
    assert len(again.of(imports.INVALID)) == len(first.of(imports.INVALID))


def dense(count: int, vocabulary: int, seed: int, sizes: tuple[int, ...]) -> RuleSource:
    """Items of ``sizes`` words drawn from a few dozen: most pairs share many words, the shape
    that makes a filter on shared words read long lists."""
    rng = random.Random(seed)
    words = _WORDS[:vocabulary]
    texts = [" ".join(rng.sample(words, rng.choice(sizes))) for _ in range(count)]
    return RuleSource(
        "AGENTS.md",
        [Item(text, (), line) for line, text in enumerate(texts, start=1)],
        "AGENTS.md@2026-11-02",
    )


def test_items_sharing_most_of_their_words_plan_as_one_by_one(engine: Engine) -> None:
    source = dense(2_000, 30, seed=3, sizes=(4, 5, 6, 8, 10, 12, 14))
    expected = one_by_one(engine, source)
    with transaction(engine) as session:
        planned = imports.plan(session, [source], scope=SCOPE, max_chars=MAX_CHARS)
    assert [(e.outcome, e.duplicate_of, e.problem) for e in planned.entries] == expected
    assert planned.of(imports.REPEAT) and planned.of(imports.ADD)


def test_a_file_of_dense_items_is_planned_without_comparing_every_pair(engine: Engine) -> None:
    # The old in-file check compared each item with every earlier one sharing a common word;
    # up to ten words, each item now looks up its own subsets of the words a partner shares.
    source = dense(30_000, 40, seed=4, sizes=(4, 5, 6, 7, 8, 9, 10))
    with hang_guard(300, "planning 30,000 dense items"), transaction(engine) as session:
        planned = imports.plan(session, [source], scope=SCOPE, max_chars=MAX_CHARS)
    assert len(planned.entries) == 30_000

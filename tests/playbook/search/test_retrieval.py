"""Retrieval: scope, learning ranks, loads, budgets, freshness across processes, snapshots."""

from __future__ import annotations

import json
import random
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import Engine, delete, func, select, update

from playbook import clock
from playbook.db import transaction
from playbook.errors import InvalidInput
from playbook.lessons import bulk, lifecycle
from playbook.models import Bullet, UsageEvent
from playbook.outcomes import usage
from playbook.search.retrieval import Retriever
from playbook.search.text import Ticket
from playbook.version import playbook_version

FILLER = [
    f"Unrelated lesson number {n} about {word}"
    for n, word in enumerate(
        ["logging", "metrics", "tracing", "docker", "helm", "terraform", "kafka", "redis"]
    )
]


def seed(engine: Engine, *lessons: tuple[str, str]) -> None:
    # A realistic playbook has many lessons; in a tiny one every shared word has idf <= 0.
    with transaction(engine) as session:
        if not session.scalar(select(func.count()).select_from(Bullet)):
            for n, text in enumerate(FILLER):  # own ids and scope: they never show up
                bulk.put(session, {"id": f"filler-{n}", "text": text, "scope": "FILL"}, actor="t")
        for text, scope in lessons:
            lifecycle.add(session, text, learned_from="T-1", actor="t", scope=scope)


def search(engine: Engine, retriever: Retriever, text: str, scope: str = "CTMS", **kwargs):
    with transaction(engine) as session:
        return retriever.search(
            session, Ticket.from_text(text, scope=scope, key="CTMS-9"), **kwargs
        )


LESSONS = (
    ("Payment webhook retries must be idempotent", "CTMS"),
    ("Webhook retries deadlock on the orders row", "CTMS"),
    ("Payment provider webhooks arrive out of order", "global"),
    ("Webhook retries in another project", "OPS"),
    ("Images are purged through the CDN", "CTMS"),
)


def test_only_active_bullets_in_scope_or_global_are_candidates(engine: Engine) -> None:
    seed(engine, *LESSONS)
    with transaction(engine) as session:
        lifecycle.deprecate(session, "pb-2", reason="wrong", actor="t")
    result = search(engine, Retriever(), "payment webhook retries")
    assert {hit.bullet_id for hit in result.hits} == {"pb-1", "pb-3"}


def test_successful_cites_raise_and_failures_sink_but_loads_do_nothing(engine: Engine) -> None:
    seed(
        engine,
        ("Webhook retries need an idempotency key", "CTMS"),
        ("Webhook retries need a lock", "CTMS"),
    )
    retriever = Retriever()
    before = [hit.bullet_id for hit in search(engine, retriever, "webhook retries").hits]
    with transaction(engine) as session:
        for _ in range(5):
            usage.record(session, "loaded", [before[1]], ticket_key="X-1")
    assert [h.bullet_id for h in search(engine, retriever, "webhook retries").hits] == before
    with transaction(engine) as session:
        usage.record(session, "cited", [before[1]], ticket_key="X-1", success=True)
    after = search(engine, retriever, "webhook retries")
    assert [h.bullet_id for h in after.hits] == [before[1], before[0]]
    assert after.hits[0].multiplier == pytest.approx(2**0.52)
    with transaction(engine) as session:
        usage.record(session, "cited", [before[1]], ticket_key="X-2", success=False)
        usage.record(session, "cited", [before[1]], ticket_key="X-3", success=False)
    assert search(engine, retriever, "webhook retries").hits[0].bullet_id == before[0]
    plain = search(engine, retriever, "webhook retries", rank_by="bm25")
    assert [h.bullet_id for h in plain.hits] == before


def test_an_idle_lesson_fades_until_it_is_cited_or_changed(engine: Engine) -> None:
    now = datetime(2026, 11, 22, tzinfo=UTC)
    with clock.frozen(now - timedelta(days=360)):
        seed(engine, ("Webhook retries need an idempotency key", "CTMS"))
    with clock.frozen(now):
        seed(engine, ("Webhook retries need an idempotency key in the header", "CTMS"))
        retriever = Retriever()
        by_text = search(engine, retriever, "webhook retries idempotency", rank_by="bm25").hits
        assert [h.bullet_id for h in by_text] == ["pb-1", "pb-2"]
        ranked = search(engine, retriever, "webhook retries idempotency").hits
        assert [h.bullet_id for h in ranked] == ["pb-2", "pb-1"]
        assert ranked[1].freshness == pytest.approx(0.625)
        assert ranked[1].score == pytest.approx(ranked[1].bm25 * 0.625)
        with transaction(engine) as session:  # being shown is not being used
            usage.record(session, "loaded", ["pb-1"] * 5, ticket_key="X-1")
        ranked = search(engine, retriever, "webhook retries idempotency").hits
        assert [h.bullet_id for h in ranked] == ["pb-2", "pb-1"]
        with transaction(engine) as session:  # a cite, outcome not known yet
            usage.record(session, "cited", ["pb-1"], ticket_key="X-2")
        ranked = search(engine, retriever, "webhook retries idempotency").hits
        assert [h.bullet_id for h in ranked] == ["pb-1", "pb-2"]
        assert ranked[0].freshness == 1.0 and ranked[0].score == ranked[0].bm25
    with clock.frozen(now + timedelta(days=360)):
        with transaction(engine) as session:
            lifecycle.edit(session, "pb-2", actor="t", text=by_text[1].text + " always")
        ranked = search(engine, retriever, "webhook retries idempotency").hits
        assert [h.bullet_id for h in ranked] == ["pb-2", "pb-1"]


def test_other_rank_modes(engine: Engine) -> None:
    seed(
        engine,
        ("Webhook retries need an idempotency key", "CTMS"),
        ("Webhook retries need a lock too", "CTMS"),
    )
    with transaction(engine) as session:
        for n in range(5):
            usage.record(session, "cited", ["pb-2"], ticket_key=f"X-{n}", success=True)
    retriever = Retriever()
    assert (
        search(engine, retriever, "webhook retries", rank_by="reinforcements").hits[0].bullet_id
        == "pb-2"
    )
    confident = search(engine, retriever, "webhook retries", rank_by="confidence").hits
    assert confident[0].bullet_id == "pb-2" and confident[0].score > 0.82
    hybrid = search(engine, retriever, "webhook retries", rank_by="hybrid").hits
    assert hybrid[0].score == pytest.approx(
        0.7 * hybrid[0].bm25 / max(h.bm25 for h in hybrid) + 0.3 * hybrid[0].confidence
    )
    with pytest.raises(InvalidInput):
        search(engine, retriever, "webhook", rank_by="magic")


def test_loads_are_recorded_once_per_ticket_and_lesson(engine: Engine) -> None:
    seed(engine, *LESSONS)
    retriever = Retriever()
    first = search(engine, retriever, "payment webhook retries", record=True, query_id="req-1")
    again = search(engine, retriever, "payment webhook retries", record=True, query_id="req-1")
    assert [h.bullet_id for h in first.hits] == [h.bullet_id for h in again.hits]
    with transaction(engine) as session:
        loads = session.scalars(select(UsageEvent).where(UsageEvent.kind == "loaded")).all()
        assert sorted((e.bullet_id, e.rank, e.query_id) for e in loads) == sorted(
            (h.bullet_id, h.rank, "req-1") for h in first.hits
        )
    # Another search for the same ticket shows the same lessons: not loaded again.
    search(engine, retriever, "payment webhook retries", record=True, query_id="req-2")
    with transaction(engine) as session:
        assert session.scalar(select(func.count()).select_from(UsageEvent)) == len(first.hits)
        retriever.search(
            session,
            Ticket.from_text("payment webhook retries", scope="CTMS", key="CTMS-10"),
            record=True,
        )
    with transaction(engine) as session:  # another ticket loads them again
        assert session.scalar(select(func.count()).select_from(UsageEvent)) == 2 * len(first.hits)


def test_character_budget_drops_lessons_that_do_not_fit(engine: Engine) -> None:
    seed(engine, ("Webhook retries " + "long " * 40, "CTMS"), ("Webhook retries short", "CTMS"))
    result = search(engine, Retriever(), "webhook retries", max_chars=60)
    assert [h.bullet_id for h in result.hits] == ["pb-2"] and result.hits[0].rank == 1


def test_another_process_sees_changes_on_its_next_search(engine: Engine) -> None:
    seed(engine, ("Webhook retries need an idempotency key", "CTMS"))
    theirs = Retriever()  # a second process with its own index
    assert [h.bullet_id for h in search(engine, theirs, "webhook retries").hits] == ["pb-1"]
    seed(engine, ("Webhook retries deadlock the orders row", "CTMS"))
    assert {h.bullet_id for h in search(engine, theirs, "webhook retries").hits} == {"pb-1", "pb-2"}
    with transaction(engine) as session:
        lifecycle.deprecate(session, "pb-1", reason="stale", actor="t")
        lifecycle.edit(session, "pb-2", actor="t", text="Orders row deadlocks under load")
    assert search(engine, theirs, "webhook retries").hits == []
    assert [h.bullet_id for h in search(engine, theirs, "orders deadlocks").hits] == ["pb-2"]


def test_cli_search(cli) -> None:
    cli(
        "add",
        "Payment webhook retries must be idempotent",
        "--learned-from",
        "CTMS-1",
        "--scope",
        "CTMS",
    )
    cli("add", "Images are purged through the CDN", "--learned-from", "CTMS-2", "--scope", "CTMS")
    table = cli(
        "search", "Checkout fails when the payment webhook retries", "--scope", "CTMS", "--explain"
    )
    assert table.exit_code == 0
    assert "pb-1" in table.stdout and "pb-2" not in table.stdout
    assert "bm25" in table.stdout and "fresh" in table.stdout
    data = json.loads(
        cli(
            "search",
            "webhook retries",
            "--scope",
            "CTMS",
            "--json",
            "--record",
            "--ticket",
            "CTMS-9",
        ).stdout
    )
    assert data["results"][0]["id"] == "pb-1" and data["recorded"]
    assert json.loads(cli("show", "pb-1", "--json").stdout)["loads"] == 1
    assert cli("search", "x", "--record").exit_code == 2


def _word(i: int, j: int) -> str:
    """A letters-only word unique to (i, j), so no two lessons overlap beyond the shared ones."""
    letters = ""
    for n in (i, j, i + 7 * j):
        letters += chr(97 + n % 26) + chr(97 + n // 26 % 26)
    return "q" + letters


def test_feedback_finds_a_boosted_lesson_far_down_the_bm25_list(engine: Engine) -> None:
    # 40 lessons match the query, each longer (so lower in BM25) than the one before; 200 do not.
    with transaction(engine) as session:
        for i in range(40):
            filler = " ".join(_word(i, j) for j in range(i + 1))
            lifecycle.add(session, f"webhook retries {filler}", learned_from="T-1", actor="t")
        for i in range(200):
            filler = " ".join(_word(100 + i, j) for j in range(3))
            lifecycle.add(session, f"images purged {filler}", learned_from="T-2", actor="t")
    retriever = Retriever()
    by_bm25 = search(engine, retriever, "webhook retries", k=100, rank_by="bm25").hits
    assert len(by_bm25) == 40
    penalized = [h.bullet_id for h in by_bm25[:3]]
    # The weakest match beyond the first 20 fetched that doubling lifts into the top 5.
    boosted = [h.bullet_id for h in by_bm25[20:] if 2 * h.bm25 > by_bm25[7].bm25][-1]
    with transaction(engine) as session:
        usage.record(session, "cited", [boosted] * 5, ticket_key="X-1", success=True)
        usage.record(session, "cited", penalized * 5, ticket_key="X-2", success=False)
    multiplier = {h.bullet_id: 1.0 for h in by_bm25}
    multiplier[boosted] = 2.0
    multiplier.update(dict.fromkeys(penalized, 0.5))
    expected = sorted(by_bm25, key=lambda h: (-h.bm25 * multiplier[h.bullet_id], h.bullet_id))
    got = search(engine, retriever, "webhook retries", k=5).hits
    assert [h.bullet_id for h in got] == [h.bullet_id for h in expected[:5]]
    assert boosted in {h.bullet_id for h in got}
    assert not set(penalized) & {h.bullet_id for h in got}


def test_feedback_top_k_equals_ranking_every_match(engine: Engine) -> None:
    # Lessons of every age and length, some cited (refreshed) since, some rated up or down,
    # some edited after their cite: the first five must be those of scoring all of them.
    rng = random.Random(7)
    now = datetime(2026, 11, 22, tzinfo=UTC)
    ids = [f"pb-{i}" for i in range(1, 151)]
    for i, bullet_id in enumerate(ids):
        with clock.frozen(now - timedelta(days=rng.uniform(0, 1200))), transaction(engine) as s:
            filler = " ".join(_word(i, j) for j in range(rng.randint(1, 12)))
            lesson = {"id": bullet_id, "text": f"webhook retries {filler}", "scope": "CTMS"}
            bulk.put(s, lesson, actor="t")
    for bullet_id in rng.sample(ids, 60):
        with clock.frozen(now - timedelta(days=rng.uniform(0, 30))), transaction(engine) as s:
            outcome = rng.choice([True, False, None])
            cites = [bullet_id] * rng.randint(1, 5)
            usage.record(s, "cited", cites, ticket_key="X-1", success=outcome)
            if rng.random() < 0.2:
                text = lifecycle.get(s, bullet_id).text
                lifecycle.edit(s, bullet_id, actor="t", text=text + " again")
    with clock.frozen(now):
        retriever = Retriever()
        every = search(engine, retriever, "webhook retries", k=1000).hits
        assert len(every) == 150
        assert len({h.freshness for h in every}) > 100  # the ages really differ
        for k in (1, 5, 10):
            got = search(engine, retriever, "webhook retries", k=k).hits
            assert [h.bullet_id for h in got] == [h.bullet_id for h in every[:k]]


def test_feedback_finds_an_old_lesson_a_recent_cite_refreshed(engine: Engine) -> None:
    # The best text match is eight years old, so it sits below 30 newer matches until an
    # agent cites it (outcome unknown): that cite makes it fresh again, and first.
    now = datetime(2026, 11, 22, tzinfo=UTC)
    with clock.frozen(now - timedelta(days=3000)), transaction(engine) as session:
        bulk.put(session, {"id": "old", "text": f"webhook retries {_word(0, 0)}"}, actor="t")
    with clock.frozen(now), transaction(engine) as session:
        for i in range(1, 41):
            filler = " ".join(_word(i, j) for j in range(i + 1))
            bulk.put(session, {"id": f"new-{i}", "text": f"webhook retries {filler}"}, actor="t")
    with clock.frozen(now):
        retriever = Retriever()
        assert "old" not in [h.bullet_id for h in search(engine, retriever, "webhook retries").hits]
        with transaction(engine) as session:
            usage.record(session, "cited", ["old"], ticket_key="X-1")
        hits = search(engine, retriever, "webhook retries").hits
    assert hits[0].bullet_id == "old" and hits[0].freshness == 1.0


def _ids(engine: Engine, retriever: Retriever, text: str) -> list[str]:
    return [hit.bullet_id for hit in search(engine, retriever, text, k=10).hits]


def test_a_cold_start_loads_the_snapshot_and_reads_only_what_changed_since(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    from playbook.models import IndexSnapshot
    from playbook.search import sync

    monkeypatch.setattr(sync, "SNAPSHOT_MIN_LESSONS", 1)
    monkeypatch.setattr(sync, "SNAPSHOT_EVERY", 5)
    seed(engine, *LESSONS)
    first = Retriever()
    before = _ids(engine, first, "payment webhook retries")
    with transaction(engine) as session:
        snapshot = session.execute(select(IndexSnapshot.version, IndexSnapshot.documents)).one()
        assert snapshot.documents > 0
        # Changed after the snapshot: a new lesson, an edit, a deprecation.
        lifecycle.add(
            session,
            "Payment webhooks need retries with backoff",
            learned_from="T-2",
            actor="t",
            scope="CTMS",
        )
        lifecycle.edit(session, before[0], actor="t", text="Broker journal corruption on restart")
        lifecycle.deprecate(session, before[1], reason="wrong", actor="t")
    cold, rebuilt = Retriever(), Retriever(snapshots=False)
    assert _ids(engine, cold, "payment webhook retries") == _ids(
        engine, rebuilt, "payment webhook retries"
    )
    assert cold.loaded_from is not None and rebuilt.loaded_from is None
    shown = _ids(engine, cold, "payment webhook retries")
    assert before[0] not in shown and before[1] not in shown
    assert _ids(engine, cold, "broker journal corruption") == [before[0]]


def test_a_snapshot_that_cannot_be_read_or_of_another_tokenizer_is_not_used(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    from playbook.models import IndexSnapshot
    from playbook.search import sync

    monkeypatch.setattr(sync, "SNAPSHOT_MIN_LESSONS", 1)
    monkeypatch.setattr(sync, "SNAPSHOT_EVERY", 1)
    seed(engine, *LESSONS)
    expected = _ids(engine, Retriever(), "payment webhook retries")
    with transaction(engine) as session:
        session.execute(update(IndexSnapshot).values(data=b"garbage"))
    broken = Retriever()
    assert _ids(engine, broken, "payment webhook retries") == expected
    assert broken.loaded_from is None
    with transaction(engine) as session:  # the next sync that read enough saved a good one
        assert session.scalars(select(IndexSnapshot.data)).one() != b"garbage"
        session.execute(update(IndexSnapshot).values(tokenizer=IndexSnapshot.tokenizer - 1))
    other = Retriever()
    assert _ids(engine, other, "payment webhook retries") == expected
    assert other.loaded_from is None


def test_an_import_saves_a_snapshot_the_next_process_starts_from(
    engine: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from playbook.models import IndexSnapshot
    from playbook.search import sync
    from playbook.transfer.imports import import_file

    monkeypatch.setattr(sync, "SNAPSHOT_MIN_LESSONS", 3)
    path = tmp_path / "lessons.jsonl"
    texts = [
        "Retry payment webhooks with an idempotency key",
        "Purge the CDN cache before deploying static assets",
        "Pin the broker version in integration tests",
        "Rotate the signing key before it expires",
    ]
    path.write_text("".join(json.dumps({"text": t, "learned_from": "IMP-1"}) + "\n" for t in texts))
    with transaction(engine) as session:
        report = import_file(session, path, actor="t", batch_size=2)
    assert report.created == 4
    with transaction(engine) as session:
        assert session.execute(select(IndexSnapshot.documents)).scalars().all() == [4]
    cold = Retriever()
    assert _ids(engine, cold, "CDN purge") and cold.loaded_from is not None
    assert _ids(engine, cold, "CDN purge") == _ids(engine, Retriever(snapshots=False), "CDN purge")


def test_an_add_saves_a_snapshot_that_still_reads_its_own_lesson(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    from playbook.models import IndexSnapshot
    from playbook.search import retrieval, sync

    monkeypatch.setattr(sync, "SNAPSHOT_MIN_LESSONS", 1)
    seed(engine, *LESSONS)
    with transaction(engine) as session:  # as if the playbook predates snapshots
        session.execute(delete(IndexSnapshot))
    retrieval.forget_shared()
    with transaction(engine) as session:  # the first sync of this process builds, then saves
        added = lifecycle.add(
            session,
            "Quarantine flaky integration tests in nightly builds",
            learned_from="T-3",
            actor="t",
            scope="CTMS",
        )
        version = playbook_version(session)
    with transaction(engine) as session:
        # Labelled below the add's version: the add's lesson was not stamped when it was taken.
        assert session.scalars(select(IndexSnapshot.version)).all() == [version - 1]
    cold = Retriever()
    assert _ids(engine, cold, "flaky nightly tests") == [added.bullet.id]
    assert cold.loaded_from == version - 1


def test_lessons_of_a_transaction_that_rolled_back_are_not_found(engine: Engine) -> None:
    seed(engine, *LESSONS)
    with pytest.raises(RuntimeError), transaction(engine) as session:
        result = lifecycle.add(
            session,
            "Quarantine flaky integration tests in nightly builds",
            learned_from="T-3",
            actor="t",
            scope="CTMS",
        )
        shared = Retriever.shared(session)
        found = shared.search(session, Ticket.from_text("flaky nightly tests", scope="CTMS"))
        assert [hit.bullet_id for hit in found.hits] == [result.bullet.id]
        raise RuntimeError("the request failed after the add")
    with transaction(engine) as session:
        shared = Retriever.shared(session)
        assert (
            shared.search(session, Ticket.from_text("flaky nightly tests", scope="CTMS")).hits == []
        )
        again = lifecycle.add(
            session,
            "Quarantine flaky integration tests in nightly builds",
            learned_from="T-3",
            actor="t",
            scope="CTMS",
        )
        assert again.created

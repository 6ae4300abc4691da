"""👍/👎 on the bot's GitHub lessons comment become fit verdicts: read from the fake GitHub in
its real shapes (ETag and 304, Link pagination, 404) when the ticket or its PR closes and by
the scheduled sweep, through the real worker, scheduler job and PyGithub client."""

from __future__ import annotations

import copy
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from prometheus_client import REGISTRY
from sqlalchemy import Engine, select, update

from bot.scheduler import JOBS
from playbook import clock
from playbook.db import transaction
from playbook.fit.reactions import GONE
from playbook.lessons import lifecycle
from playbook.models import BotComment, Bullet, FitCalibration, FitLabel, Rating
from tests.loop_harness import REPO, Loop, start_loop
from tests.payloads import fixture, pull_request

KEY = f"{REPO}#1"
SPELLING = (
    ("Spelling errors in the README: run codespell in CI", "x/y#1", REPO),
    ("README spelling fixes: check the file with a spell checker", "x/y#2", REPO),
)
REACTIONS_PATH = "/reactions"


def seed(engine: Engine) -> None:
    with transaction(engine) as session:
        for text, learned_from, scope in SPELLING:
            lifecycle.add(session, text, learned_from=learned_from, scope=scope, actor="seed")


def commented(loop: Loop, *, private: bool = False, number: int = 1) -> int:
    """Issue ``number`` of REPO opened and given the bot's lessons comment; its GitHub id."""
    if REPO not in loop.github.repos:
        loop.github.add_repo(REPO, private=private)
    loop.github.add_issue(REPO, number, "Spelling error in the README file")
    opened = fixture("issues.opened")
    opened["issue"]["number"] = number
    loop.github_event("issues.opened", opened)
    loop.process()
    [comment] = loop.github.comments_on(REPO, number)
    return int(comment["id"])


def closed(loop: Loop, number: int = 1) -> None:
    """GitHub's issues.closed for issue ``number``, processed."""
    payload = copy.deepcopy(fixture("issues.opened"))
    payload["action"] = "closed"
    payload["issue"].update(number=number, state="closed")
    loop.github_event("issues.closed", payload)
    loop.process()


def shown(engine: Engine, key: str = KEY) -> list[str]:
    with transaction(engine) as session:
        row = session.scalars(select(BotComment).where(BotComment.ticket_key == key)).one()
        return list(row.bullet_ids)


def verdicts(engine: Engine, key: str = KEY) -> set[tuple[str, str, bool]]:
    with transaction(engine) as session:
        rows = session.scalars(select(FitLabel).where(FitLabel.ticket_key == key)).all()
        return {(r.actor, r.bullet_id, r.helpful) for r in rows}


def comment_row(engine: Engine, key: str = KEY) -> BotComment:
    with transaction(engine) as session:
        return session.scalars(select(BotComment).where(BotComment.ticket_key == key)).one()


def reaction_reads(loop: Loop, comment_id: int) -> list[Any]:
    path = f"/repos/{REPO}/issues/comments/{comment_id}/reactions"
    return loop.github.calls("GET", path)


def sweep(loop: Loop) -> None:
    JOBS["reactions"][1](loop.engine, loop.settings)


def lesson_state(engine: Engine) -> tuple[list[dict[str, Any]], int]:
    """Every column of every lesson (status, cites, ratings, version...), and the ratings."""
    with transaction(engine) as session:
        rows = session.scalars(select(Bullet).order_by(Bullet.id)).all()
        columns = [c.name for c in Bullet.__table__.columns]
        ratings = len(session.scalars(select(Rating)).all())
        return [{c: getattr(b, c) for c in columns} for b in rows], ratings


def metric(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


def test_closing_the_issue_reads_reactions_counting_only_writers_of_a_public_repo(
    loop: Loop,
) -> None:
    seed(loop.engine)
    comment = commented(loop)
    lessons = shown(loop.engine)
    assert lessons
    before = lesson_state(loop.engine)
    github = loop.github
    github.permissions[(REPO, "maintainer")] = "maintain"
    github.add_reaction(comment, "Codertocat", "+1")  # write access (the harness's)
    github.add_reaction(comment, "maintainer", "-1")
    github.add_reaction(comment, "stranger", "-1")  # anyone can react on a public repo
    github.add_reaction(comment, "dependabot[bot]", "-1")
    github.add_reaction(comment, "playbook-bot[bot]", "+1")  # the bot itself
    github.add_reaction(comment, "Codertocat", "heart")  # says nothing about fit
    closed(loop)
    assert verdicts(loop.engine) == {
        *(("Codertocat", b, True) for b in lessons),
        *(("maintainer", b, False) for b in lessons),
    }
    asked = {c.path.rsplit("/", 2)[-2] for c in github.calls("GET", f"/repos/{REPO}/collaborators")}
    assert asked == {"Codertocat", "maintainer", "stranger"}  # bots are never asked about
    [read] = reaction_reads(loop, comment)
    assert read.query["per_page"] == "100" and "If-None-Match" not in read.headers
    # Fit for one ticket is no verdict on the lesson: status, confidence, counts stay.
    assert lesson_state(loop.engine) == before


def test_in_a_private_repo_everyone_who_reacted_counts(loop: Loop) -> None:
    seed(loop.engine)
    comment = commented(loop, private=True)
    lessons = shown(loop.engine)
    loop.github.add_reaction(comment, "reader", "+1")
    loop.github.add_reaction(comment, "renovate[bot]", "-1")
    closed(loop)
    assert verdicts(loop.engine) == {("reader", b, True) for b in lessons}
    assert loop.github.calls("GET", f"/repos/{REPO}/collaborators") == []


def test_an_unchanged_comment_costs_a_304_and_changes_nothing(loop: Loop) -> None:
    seed(loop.engine)
    comment = commented(loop, private=True)
    loop.github.add_reaction(comment, "reader", "+1")
    closed(loop)
    first = comment_row(loop.engine)
    assert first.reactions_etag and first.reactions_read_at
    with transaction(loop.engine) as session:
        at_first = {r.id: r.at for r in session.scalars(select(FitLabel))}
    unchanged = metric("playbook_reaction_reads_total", outcome="unchanged")
    sweep(loop)
    closed(loop)  # a second closing (reopened and closed again) reads again too
    *_, again, third = reaction_reads(loop, comment)
    assert again.headers["If-None-Match"] == first.reactions_etag
    assert third.headers["If-None-Match"] == first.reactions_etag
    assert metric("playbook_reaction_reads_total", outcome="unchanged") == unchanged + 2
    with transaction(loop.engine) as session:
        assert {r.id: r.at for r in session.scalars(select(FitLabel))} == at_first
    assert comment_row(loop.engine).reactions_read_at > first.reactions_read_at
    # A new reaction changes the answer: read in full, and stored.
    loop.github.add_reaction(comment, "second", "-1")
    sweep(loop)
    assert ("second", shown(loop.engine)[0], False) in verdicts(loop.engine)
    assert comment_row(loop.engine).reactions_etag != first.reactions_etag


def test_reactions_beyond_one_page_are_all_read(loop: Loop) -> None:
    seed(loop.engine)
    comment = commented(loop, private=True)
    lessons = shown(loop.engine)
    for n in range(150):
        loop.github.add_reaction(comment, f"person-{n}", "+1" if n % 3 else "-1")
    closed(loop)
    found = verdicts(loop.engine)
    assert len(found) == 150 * len(lessons)
    assert ("person-149", lessons[0], True) in found and ("person-0", lessons[0], False) in found
    pages = reaction_reads(loop, comment)
    assert [p.query.get("page") for p in pages] == [None, "2"]
    # The first page's ETag cannot tell whether a later page changed: none is kept.
    assert comment_row(loop.engine).reactions_etag is None
    sweep(loop)
    assert "If-None-Match" not in reaction_reads(loop, comment)[-2].headers


def test_a_reaction_taken_back_drops_its_verdicts(loop: Loop) -> None:
    seed(loop.engine)
    comment = commented(loop, private=True)
    lessons = shown(loop.engine)
    loop.github.add_reaction(comment, "ann", "+1")
    loop.github.add_reaction(comment, "bob", "-1")
    closed(loop)
    assert {actor for actor, _, _ in verdicts(loop.engine)} == {"ann", "bob"}
    loop.github.remove_reaction(comment, "ann", "+1")
    sweep(loop)
    assert verdicts(loop.engine) == {("bob", b, False) for b in lessons}


def test_a_person_with_both_thumbs_counts_by_the_later_one(loop: Loop) -> None:
    seed(loop.engine)
    comment = commented(loop, private=True)
    lessons = shown(loop.engine)
    now = datetime.now(UTC)
    loop.github.add_reaction(comment, "dana", "-1", at=now - timedelta(minutes=5))
    loop.github.add_reaction(comment, "dana", "+1", at=now)
    loop.github.add_reaction(comment, "eve", "+1", at=now - timedelta(minutes=5))
    loop.github.add_reaction(comment, "eve", "-1", at=now)
    closed(loop)
    assert verdicts(loop.engine) == {
        *(("dana", b, True) for b in lessons),
        *(("eve", b, False) for b in lessons),
    }


def test_a_deleted_comment_is_not_read_again_and_keeps_its_verdicts(loop: Loop) -> None:
    seed(loop.engine)
    comment = commented(loop, private=True)
    loop.github.add_reaction(comment, "ann", "+1")
    closed(loop)
    kept = verdicts(loop.engine)
    del loop.github.comments[comment]  # a person deleted the bot's comment
    sweep(loop)
    assert comment_row(loop.engine).reactions_etag == f"{GONE}{comment}"
    assert verdicts(loop.engine) == kept
    reads = len(reaction_reads(loop, comment))
    sweep(loop)
    closed(loop)
    assert len(reaction_reads(loop, comment)) == reads


def test_hostile_reaction_items_are_skipped_not_fatal(loop: Loop) -> None:
    seed(loop.engine)
    comment = commented(loop, private=True)
    lessons = shown(loop.engine)
    loop.github.add_reaction(comment, "ann", "+1")
    loop.github.reactions[comment] += [
        {"id": 1, "user": None, "content": "+1", "created_at": "2026-01-01T00:00:00Z"},
        {"id": 2, "user": {"login": "x" * 5000, "type": "User"}, "content": "-1"},
        {"id": 3, "user": {"login": "mallory", "type": "User"}, "content": ["-1"]},
        {"id": 4, "user": {"login": "trent", "type": "User"}, "content": "-1", "created_at": 7},
        "not an object",
    ]
    closed(loop)
    assert verdicts(loop.engine) == {
        *(("ann", b, True) for b in lessons),
        *(("trent", b, False) for b in lessons),
    }


@pytest.fixture
def small_batches(engine: Engine, database_url: str):
    running = start_loop(engine, database_url, PLAYBOOK_REACTIONS_BATCH=2)
    yield running
    running.github.stop()
    running.jira.stop()


def test_the_sweep_reads_a_bounded_batch_longest_unread_first(small_batches: Loop) -> None:
    loop = small_batches
    seed(loop.engine)
    ids = [commented(loop, private=True, number=n) for n in (1, 2, 3, 4)]
    # The fourth was last changed 40 days ago: people are done reacting to it.
    with transaction(loop.engine) as session:
        session.execute(
            update(BotComment)
            .where(BotComment.ticket_key == f"{REPO}#4")
            .values(updated_at=clock.now() - timedelta(days=40))
        )
    sweep(loop)
    assert [len(reaction_reads(loop, i)) for i in ids] == [1, 1, 0, 0]
    sweep(loop)
    assert [len(reaction_reads(loop, i)) for i in ids] == [2, 1, 1, 0]
    sweep(loop)
    assert [len(reaction_reads(loop, i)) for i in ids] == [2, 2, 2, 0]


def test_closing_a_pr_reads_the_tickets_it_closes(loop: Loop) -> None:
    seed(loop.engine)
    comment = commented(loop, private=True)
    lessons = shown(loop.engine)
    loop.github.add_reaction(comment, "ann", "-1")
    loop.github_event("pull_request.opened", pull_request("opened", body="Fixes #1"))
    loop.process()
    assert verdicts(loop.engine) == set()  # an open PR is no reason to read
    loop.github_event("pull_request.closed", pull_request("closed", body="Fixes #1", merged=True))
    loop.process()
    assert verdicts(loop.engine) == {("ann", b, False) for b in lessons}
    # Delivered again (GitHub retried): the comment answers 304, nothing changes.
    loop.github_event("pull_request.closed", pull_request("closed", body="Fixes #1", merged=True))
    loop.process()
    _, again = reaction_reads(loop, comment)
    assert again.headers.get("If-None-Match")
    assert verdicts(loop.engine) == {("ann", b, False) for b in lessons}


def test_enough_verdicts_recalibrate_the_ticket_scope(loop: Loop) -> None:
    seed(loop.engine)
    comment = commented(loop, private=True)
    lessons = shown(loop.engine)
    with transaction(loop.engine) as session:
        session.execute(
            update(BotComment)
            .where(BotComment.ticket_key == KEY)
            .values(relevances=[0.5] * len(lessons))
        )
    people = -(-50 // len(lessons))  # enough for 50 labelled pairs
    for n in range(people):
        loop.github.add_reaction(comment, f"person-{n}", "-1")
    closed(loop)
    with transaction(loop.engine) as session:
        fitted = session.get(FitCalibration, REPO)
        assert fitted is not None and fitted.labels == people * len(lessons)
        assert fitted.helpful == 0 and fitted.shift < 0  # told "off-topic": lower, within bounds


def test_without_github_the_sweep_does_nothing(engine: Engine, settings: Any) -> None:
    JOBS["reactions"][1](engine, settings)


def test_a_rate_limit_stops_the_sweep_where_it_was(small_batches: Loop) -> None:
    loop = small_batches
    seed(loop.engine)
    ids = [commented(loop, private=True, number=n) for n in (1, 2)]
    path = f"/repos/{REPO}/issues/comments/{ids[0]}/reactions"
    reset = str(int(datetime.now(UTC).timestamp()) + 600)
    limited = {"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": reset}
    loop.github.fail("GET", path, 403, headers=limited)
    sweep(loop)
    assert [len(reaction_reads(loop, i)) for i in ids] == [1, 0]  # the second was not asked
    assert comment_row(loop.engine).reactions_read_at is None  # still first in line
    sweep(loop)
    assert [len(reaction_reads(loop, i)) for i in ids] == [2, 1]


def test_after_an_edit_shows_other_lessons_the_reactions_judge_those(loop: Loop) -> None:
    seed(loop.engine)
    comment = commented(loop, private=True)
    loop.github.add_reaction(comment, "ann", "+1")
    closed(loop)
    before = shown(loop.engine)
    with transaction(loop.engine) as session:
        lifecycle.add(
            session,
            "Spelling errors in the README file: run the spell checker on it before merging",
            learned_from="x/y#3",
            scope=REPO,
            actor="seed",
        )
    loop.github_event("issues.labeled", fixture("issues.labeled"))
    loop.process()
    after = shown(loop.engine)
    assert set(after) != set(before)
    sweep(loop)  # the reactions did not change, the lessons they are about did
    assert "If-None-Match" not in reaction_reads(loop, comment)[-1].headers
    assert verdicts(loop.engine) == {("ann", b, True) for b in after}
    sweep(loop)
    assert reaction_reads(loop, comment)[-1].headers.get("If-None-Match")


def test_a_crowd_of_outsiders_costs_a_bounded_number_of_checks(
    small_batches: Loop, monkeypatch: pytest.MonkeyPatch
) -> None:
    import bot.reactions

    monkeypatch.setattr(bot.reactions, "MAX_ACCESS_CHECKS", 3)
    loop = small_batches
    seed(loop.engine)
    crowded, calm = (commented(loop, number=n) for n in (1, 2))
    for n in range(5):
        loop.github.add_reaction(crowded, f"outsider-{n}", "-1")
    loop.github.add_reaction(calm, "Codertocat", "+1")
    sweep(loop)
    assert len(loop.github.calls("GET", f"/repos/{REPO}/collaborators")) == 3
    assert verdicts(loop.engine) == set()  # not stored half checked
    assert reaction_reads(loop, calm) == []  # the run stopped there
    sweep(loop)  # the crowded comment waits behind the others: it holds no run up
    assert {actor for actor, _, _ in verdicts(loop.engine, f"{REPO}#2")} == {"Codertocat"}

"""Merged PRs flag the lessons anchored to the files they change; a maintainer clears them."""

from __future__ import annotations

from sqlalchemy import select

from playbook.anchors import stale
from playbook.db import transaction
from playbook.lessons import lifecycle
from playbook.models import Bullet, Revision
from tests.loop_harness import Loop
from tests.payloads import REPO, fixture, pull_request


def _lesson(loop: Loop, text: str, paths: list[str] | None, scope: str = REPO) -> str:
    with transaction(loop.engine) as session:
        added = lifecycle.add(session, text, learned_from="CTMS-1", actor="t", scope=scope)
        added.bullet.paths = paths
        return added.bullet.id


def _merge(loop: Loop, files: list[tuple[str, str, str | None]], number: int = 2) -> None:
    if REPO not in loop.github.repos:
        loop.github.add_repo(REPO)
    loop.github.add_pull(REPO, number, title="CTMS-4337: dedupe webhook retries")
    for status, path, previous in files:
        loop.github.add_pull_file(REPO, number, path, "+x", status=status, previous=previous)
    merged = pull_request("closed", number=number, merged=True)
    loop.github_event("pull_request.closed", merged)
    loop.process()


def _bullet(loop: Loop, bullet_id: str) -> Bullet:
    with transaction(loop.engine) as session:
        bullet = lifecycle.get(session, bullet_id)
        session.expunge(bullet)
        return bullet


def _actions(loop: Loop, bullet_id: str) -> list[str]:
    with transaction(loop.engine) as session:
        query = select(Revision.action).where(Revision.bullet_id == bullet_id)
        return list(session.scalars(query.order_by(Revision.id)))


def test_a_deletion_flags_and_every_file_gone_is_said(loop: Loop) -> None:
    locking = _lesson(loop, "Take the row lock before the stock check", ["orders/locking.py"])
    other = _lesson(loop, "Retry the payment call once", ["payments/**"])
    loose = _lesson(loop, "Name branches after the ticket", None)
    elsewhere = _lesson(loop, "Lock rows in the other repo", ["orders/locking.py"], "acme/other")
    _merge(loop, [("removed", "orders/locking.py", None), ("added", "payments/new.py", None)])
    flagged = _bullet(loop, locking)
    assert flagged.stale_since is not None
    assert flagged.stale_pr == f"{REPO}#2"
    assert (
        flagged.stale_detail
        == f"{REPO}#2 removed every file it is about (deleted orders/locking.py)"
    )
    assert stale.files_gone(flagged.stale_detail) == f"{REPO}#2"
    assert flagged.status == "active"  # a flag never deprecates
    assert "flag_stale" in _actions(loop, locking)
    # An added file changes no lesson; unanchored lessons and another scope's are left alone.
    for untouched in (other, loose, elsewhere):
        assert _bullet(loop, untouched).stale_since is None


def test_a_rename_is_followed_and_flagged(loop: Loop) -> None:
    moved = _lesson(loop, "Keep the order state machine pure", ["orders/a.py", "orders/*.md"])
    _merge(loop, [("renamed", "orders/b.py", "orders/a.py")])
    bullet = _bullet(loop, moved)
    assert bullet.paths == ["orders/b.py", "orders/*.md"]
    assert bullet.stale_detail == f"{REPO}#2 renamed orders/a.py -> orders/b.py"
    assert stale.files_gone(bullet.stale_detail) is None


def test_a_modify_flags_through_a_glob_and_redelivery_is_idempotent(loop: Loop) -> None:
    anchored = _lesson(loop, "Validate the cart before pricing", ["cart/**/*.py"])
    _merge(loop, [("modified", "cart/pricing/rules.py", None)])
    assert _bullet(loop, anchored).stale_detail == f"{REPO}#2 modified cart/pricing/rules.py"
    # GitHub redelivers the merge; a maintainer cleared the flag meanwhile: nothing comes back.
    with transaction(loop.engine) as session:
        assert stale.clear(session, anchored, actor="maintainer", reason="still true")
    loop.github_event("pull_request.closed", pull_request("closed", merged=True))
    loop.process()
    assert _bullet(loop, anchored).stale_since is None
    assert _actions(loop, anchored).count("flag_stale") == 1


def test_a_clear_and_an_edit_resolve_the_flag(loop: Loop) -> None:
    cleared = _lesson(loop, "Use the v2 client for orders", ["orders/client.py"])
    edited = _lesson(loop, "Orders are locked by row", ["orders/client.py"])
    _merge(loop, [("modified", "orders/client.py", None)])
    with transaction(loop.engine) as session:
        assert stale.clear(session, cleared, actor="maintainer", reason="checked")
        assert not stale.clear(session, cleared, actor="maintainer")  # nothing left to clear
        lifecycle.edit(
            session, edited, actor="maintainer", text="Orders are locked by advisory lock"
        )
    assert _bullet(loop, cleared).stale_since is None
    assert _actions(loop, cleared)[-1] == "clear_stale"
    after = _bullet(loop, edited)
    assert after.stale_since is None and after.stale_detail is None
    with transaction(loop.engine) as session:
        last = session.scalars(
            select(Revision).where(Revision.bullet_id == edited).order_by(Revision.id.desc())
        ).first()
        assert last is not None and last.action == "edit"
        assert f"stale flag cleared ({REPO}#2)" in (last.reason or "")


def test_a_lesson_whose_files_are_gone_is_warned_of_and_left_out_of_agents_md(loop: Loop) -> None:
    from playbook.repos import syncs
    from playbook.rules import block
    from playbook.scopes import View

    gone = _lesson(loop, "Spelling errors in the README: run codespell in CI", ["README.md"])
    kept = _lesson(loop, "README spelling: commit has one t", ["docs/**"])
    _merge(loop, [("removed", "README.md", None), ("modified", "docs/index.md", None)])
    # The bot's comment still shows both (a flag never hides a lesson), the gone one warned of.
    loop.github.add_issue(REPO, 1, "Spelling error in the README file")
    loop.github_event("issues.opened", fixture("issues.opened"))
    loop.process()
    [comment] = loop.github.comments_on(REPO, 1)
    body = comment["body"]
    assert f"**[{gone}]**" in body and f"**[{kept}]**" in body
    warning = "⚠ the files it is about were removed in"
    assert body.count(warning) == 1
    assert body.index(warning) < body.index(f"**[{kept}]**")  # under the gone lesson only
    # The AGENTS.md block leaves it out until a maintainer looks, and says why.
    with transaction(loop.engine) as session:
        chosen = [entry.bullet_id for entry in block.choose(session, [REPO, "global"])]
        why = syncs.why_removed(session, [gone], View(REPO))
    assert chosen == [kept]
    assert why[gone] == f"its files were removed in {REPO}#2; out until a maintainer looks"
    with transaction(loop.engine) as session:
        stale.clear(session, gone, actor="maintainer", reason="codespell runs on docs now")
        chosen = [entry.bullet_id for entry in block.choose(session, [REPO, "global"])]
    assert sorted(chosen) == sorted([gone, kept])


def test_stats_digest_counts_the_weeks_flags_by_resolution(loop: Loop, cli) -> None:
    import json

    from playbook.lessons import demotions

    words = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf"]
    ids = [
        _lesson(loop, f"Lesson {word} about module {n}", [f"m{n}.py"])
        for n, word in enumerate(words)
    ]
    replacement = _lesson(loop, "The newer lesson for module two", None)
    _merge(loop, [("modified", f"m{n}.py", None) for n in range(len(words))])
    with transaction(loop.engine) as session:
        stale.clear(session, ids[0], actor="maintainer")
        lifecycle.edit(session, ids[1], actor="maintainer", text="Lesson bravo, checked again")
        lifecycle.supersede(session, ids[2], replacement, actor="maintainer")
        lifecycle.deprecate(session, ids[3], reason="the module went away", actor="maintainer")
        # The bot's own deprecations, as a rejected PR and the holdout's prune make them:
        # the flag ends, but no maintainer looked at what the merged PR changed.
        lifecycle.deprecate(
            session,
            ids[5],
            reason=demotions.UNMERGED,
            actor="playbook-bot",
            note=f"{demotions.UNMERGED}: {REPO}#9 closed without merge",
        )
        lifecycle.deprecate(session, ids[6], reason=demotions.MEASURED_HARMFUL, actor="scheduler")
    report = json.loads(cli("stats", "--json").stdout)
    assert report["stale"] == {
        "flagged": 1,
        "week": {
            "flagged": 7,
            "cleared": 1,
            "edited": 1,
            "superseded": 1,
            "deprecated": 1,
            "deprecated_by_bot": 2,
            "open": 1,
        },
    }
    text = cli("stats").stdout
    assert (
        "possibly stale: 1 lesson flagged (`playbook-bot stale`); last 7 days: 7 flagged "
        "(1 cleared, 1 edited, 1 superseded, 1 deprecated, 2 deprecated by the bot, 1 open)"
    ) in text


def test_the_agents_md_sync_leaves_out_a_lesson_whose_files_are_gone(loop: Loop) -> None:
    from tests.bot.agents_md_world import world_for

    world = world_for(loop)
    gone = _lesson(loop, "Keep the lock ordering of orders/locking.py", ["orders/locking.py"])
    kept = _lesson(loop, "Dedupe webhook retries by the delivery id", ["hooks/**"])
    world.sync()
    _merge(loop, [("removed", "orders/locking.py", None), ("modified", "hooks/a.py", None)], 50)
    report = world.sync()
    assert report.action == "updated"
    text = world.on_branch() or b""
    assert f"[{gone}]".encode() not in text and f"[{kept}]".encode() in text
    (pull,) = world.sync_pulls()
    since = pull["body"].split("### Since the previous version of this pull request")[1]
    assert f"- removed {gone}: its files were removed in {REPO}#50; out until a maintainer" in since
    # A maintainer looked and cleared the flag: the next sync brings it back.
    with transaction(loop.engine) as session:
        stale.clear(session, gone, actor="maintainer", reason="the lock moved to orders/db.py")
    world.sync()
    assert f"[{gone}]".encode() in (world.on_branch() or b"")


def test_the_flag_revisions_keep_the_whole_lesson(loop: Loop) -> None:
    from datetime import timedelta

    from playbook import clock

    moved = _lesson(loop, "Keep the order state machine pure", ["orders/a.py"])
    _merge(loop, [("renamed", "orders/b.py", "orders/a.py")])
    with transaction(loop.engine) as session:
        [row] = lifecycle.as_of(session, clock.now() + timedelta(seconds=1))
        flagged = session.scalars(
            select(Revision).where(Revision.bullet_id == moved, Revision.action == "flag_stale")
        ).one()
    # `list --as-of` still reads the lesson after its flag; the rename shows in the values.
    assert row["text"] == "Keep the order state machine pure" and row["status"] == "active"
    assert flagged.before["paths"] == ["orders/a.py"] and flagged.after["paths"] == ["orders/b.py"]

"""Comments skipped for missing credentials keep their text and are posted later, once."""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from sqlalchemy import Engine, select

from bot.config import Settings
from bot.effects import DryRunEffects
from bot.worker import Services, Worker
from playbook.db import transaction
from playbook.deliveries import inbox, side_effects
from playbook.lessons import lifecycle
from playbook.models import Retrieval, SideEffect, UsageEvent
from tests.fakes.github import FakeGitHub
from tests.loop_harness import rsa_pair
from tests.payloads import fixture_body

APP_ID = 4242
INSTALLATION = 777
REPO = "Codertocat/Hello-World"
TICKET = f"{REPO}#1"
MARKER = f"<!-- playbook-bot:lessons {TICKET} -->"
LESSONS = (
    "Spelling errors in the README: run codespell in CI",
    "README typos: the docs job fails on misspelled words",
)
SETTING = "GITHUB_APP_ID with GITHUB_APP_PRIVATE_KEY (or _FILE), or GITHUB_TOKEN"


@pytest.fixture(scope="module")
def app_keys() -> tuple[str, str]:
    """An App private key (PEM) and its public key, made once: RSA generation is slow."""
    return rsa_pair()


@dataclass
class Bot:
    """A fake GitHub, and the environment values that let the bot post on it."""

    engine: Engine
    database_url: str
    github: FakeGitHub
    credentials: dict[str, str]

    def settings(self, *, credentials: bool) -> Settings:
        """The worker's settings, with or without the App's credentials."""
        values: dict[str, Any] = {
            "PLAYBOOK_DATABASE_URL": self.database_url,
            "GITHUB_API_URL": self.github.url,
            "PLAYBOOK_GITHUB_SECONDS_BETWEEN_REQUESTS": 0,
            "PLAYBOOK_GITHUB_SECONDS_BETWEEN_WRITES": 0,
            # These tests are about keeping and reposting a comment: every match is shown.
            "PLAYBOOK_MIN_RELEVANCE": 0,
        }
        if credentials:
            values.update(self.credentials)
        return Settings(_env_file=None, **values)

    def deliver(self, action: str = "opened", **changes: Any) -> str:
        """Store an `issues` delivery for the App's installation; returns its GUID."""
        guid = str(uuid.uuid4())
        with transaction(self.engine) as session:
            inbox.accept(
                session,
                source="github",
                event="issues",
                action=action,
                delivery_id=guid,
                payload=fixture_body(f"issues.{action}", **changes).decode(),
                installation_id=INSTALLATION,
            )
        return guid

    def process(self, *, credentials: bool, dry_run: bool = False) -> None:
        """Run a worker until the inbox is empty."""
        effects = DryRunEffects(echo=False) if dry_run else None
        services = Services(
            engine=self.engine, settings=self.settings(credentials=credentials), effects=effects
        )
        worker = Worker(services, name="test-worker")
        while worker.run_once():
            pass

    def bot_comments(self) -> list[dict[str, Any]]:
        """The bot's comments on the issue, oldest first."""
        return [c for c in self.github.comments_on(REPO, 1) if c["user"]["type"] == "Bot"]

    def effects(self, guid: str) -> list[SideEffect]:
        """The delivery's side effects, oldest first."""
        with transaction(self.engine) as session:
            return side_effects.for_deliveries(session, [guid])[guid]


@pytest.fixture
def bot(
    engine: Engine, database_url: str, app_keys: tuple[str, str], monkeypatch: pytest.MonkeyPatch
) -> Iterator[Bot]:
    """Lessons about README typos, an issue about one, and a fake GitHub with the App on it."""
    private, public = app_keys
    github = FakeGitHub(app_id=APP_ID, public_key=public)
    github.start()
    github.add_installation(INSTALLATION)
    github.add_issue(REPO, 1, "Spelling error in the README file")
    # The CLI reads GitHub's address from the environment; credentials only when a test says.
    monkeypatch.setenv("GITHUB_API_URL", github.url)
    monkeypatch.setenv("PLAYBOOK_GITHUB_SECONDS_BETWEEN_REQUESTS", "0")
    monkeypatch.setenv("PLAYBOOK_GITHUB_SECONDS_BETWEEN_WRITES", "0")
    with transaction(engine) as session:
        for text in LESSONS:
            lifecycle.add(session, text, learned_from="x/y#1", scope=REPO, actor="seed")
    credentials = {"GITHUB_APP_ID": str(APP_ID), "GITHUB_APP_PRIVATE_KEY": private}
    yield Bot(engine, database_url, github, credentials)
    github.stop()


def set_credentials(bot: Bot, monkeypatch: pytest.MonkeyPatch) -> None:
    """Give the CLI the App's credentials, as a maintainer setting them would."""
    for name, value in bot.credentials.items():
        monkeypatch.setenv(name, value)


def loads(engine: Engine) -> list[tuple[str, str | None]]:
    with transaction(engine) as session:
        rows = session.scalars(select(UsageEvent).where(UsageEvent.kind == "loaded")).all()
    return sorted((row.bullet_id, row.ticket_key) for row in rows)


def test_without_credentials_the_skipped_effect_keeps_the_rendered_lessons_comment(
    bot: Bot, cli
) -> None:
    guid = bot.deliver()
    bot.process(credentials=False)
    [skipped] = bot.effects(guid)
    assert (skipped.target, skipped.action, skipped.status) == ("github", "comment", "skipped")
    assert skipped.ticket_key == TICKET
    assert SETTING in (skipped.detail or "")
    assert (skipped.purpose, skipped.installation_id) == ("lessons", INSTALLATION)
    assert sorted(skipped.bullet_ids or []) == ["pb-1", "pb-2"]
    body = skipped.body or ""
    assert body.startswith("### Lessons from the playbook")
    assert "**[pb-1]**" in body and "**[pb-2]**" in body
    assert bot.bot_comments() == [] and loads(bot.engine) == []
    with transaction(bot.engine) as session:
        assert [e.id for e in side_effects.unposted(session, guid)] == [skipped.id]
    shown = json.loads(cli("deliveries", "show", guid).stdout)
    [logged] = shown["side_effects"]
    assert (logged["status"], logged["purpose"], logged["body"]) == ("skipped", "lessons", body)


def test_repost_posts_the_kept_comment_once_on_the_same_delivery_and_records_loads(
    bot: Bot, cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    guid = bot.deliver()
    bot.process(credentials=False)
    [skipped] = bot.effects(guid)
    set_credentials(bot, monkeypatch)

    result = cli("deliveries", "repost", guid)

    assert result.exit_code == 0, result.output
    [comment] = bot.bot_comments()
    assert comment["body"] == f"{skipped.body}\n{MARKER}"
    assert result.stdout == f"posted the lessons comment on {TICKET} (comment {comment['id']})\n"
    first, done = bot.effects(guid)
    assert first.id == skipped.id
    assert (done.action, done.status, done.purpose) == ("comment", "done", "lessons")
    assert (done.body, done.bullet_ids) == (skipped.body, skipped.bullet_ids)
    assert loads(bot.engine) == [("pb-1", TICKET), ("pb-2", TICKET)]
    with transaction(bot.engine) as session:
        assert side_effects.unposted(session, guid) == []
        [shown] = session.scalars(select(Retrieval.bullet_ids)).all()
    assert shown == skipped.bullet_ids

    with transaction(bot.engine) as session:
        row_id = str(inbox.get(session, guid).id)
    again = cli("deliveries", "repost", row_id)
    assert again.exit_code == 1
    assert again.stderr.strip().splitlines() == [
        f"error: delivery {row_id} has nothing to post: its skipped comments were posted, "
        "or replaced by newer ones, since"
    ]
    assert len(bot.bot_comments()) == 1
    assert len(bot.github.calls("POST", f"/repos/{REPO}/issues/1/comments")) == 1
    assert len(bot.effects(guid)) == 2
    assert loads(bot.engine) == [("pb-1", TICKET), ("pb-2", TICKET)]


def test_a_repost_racing_one_that_posted_first_posts_nothing(
    bot: Bot, monkeypatch: pytest.MonkeyPatch
) -> None:
    from bot import repost

    guid = bot.deliver()
    bot.process(credentials=False)
    with transaction(bot.engine) as session:
        stale = side_effects.unposted(session, guid)
    services = Services(engine=bot.engine, settings=bot.settings(credentials=True))
    [first] = repost.repost(services, guid)
    # A second repost that read the log before the first one's `done` was written.
    monkeypatch.setattr(repost.side_effects, "unposted", lambda _session, _guid: stale)
    [second] = repost.repost(services, guid)
    assert not first.already_posted and first.comment_id is not None
    assert (second.already_posted, second.comment_id) == (True, first.comment_id)
    assert second.describe() == (
        f"the lessons comment on {TICKET} was already posted (comment {first.comment_id})"
    )
    assert len(bot.bot_comments()) == 1
    assert [e.status for e in bot.effects(guid)] == ["skipped", "done"]


def test_repost_while_credentials_are_still_missing_exits_1_naming_the_setting(
    bot: Bot, cli
) -> None:
    from bot import repost

    guid = bot.deliver()
    bot.process(credentials=False)

    result = cli("deliveries", "repost", guid)

    assert result.exit_code == 1
    assert result.stderr.strip().splitlines() == [
        f"error: cannot post the lessons comment on {TICKET}: GitHub is not configured: "
        f"set {SETTING}"
    ]
    assert result.stdout == ""
    assert bot.bot_comments() == []
    [skipped] = bot.effects(guid)
    with transaction(bot.engine) as session:
        assert [e.id for e in side_effects.unposted(session, guid)] == [skipped.id]
    without = Services(engine=bot.engine, settings=bot.settings(credentials=False))
    assert SETTING in (repost.can_post_now(without, skipped) or "")
    with_them = Services(engine=bot.engine, settings=bot.settings(credentials=True))
    assert repost.can_post_now(with_them, skipped) is None
    assert repost.can_post_now(with_them.out, skipped) is None


def test_post_now_queues_the_kept_comment_and_the_worker_posts_it_once(bot: Bot) -> None:
    from bot import repost
    from bot.handlers import reposts

    guid = bot.deliver()
    bot.process(credentials=False)
    [skipped] = bot.effects(guid)
    without = Services(engine=bot.engine, settings=bot.settings(credentials=False))
    with pytest.raises(repost.CredentialsMissing, match=re.escape(SETTING)):
        reposts.queue(without, guid)
    with_them = Services(engine=bot.engine, settings=bot.settings(credentials=True))
    github_calls = len(bot.github.requests)

    queued = reposts.queue(with_them, guid)
    again = reposts.queue(with_them, guid)

    # Queued, not posted: nothing went to GitHub, and twice asked is queued once.
    assert queued.describe() == (
        f"queued: the worker posts the lessons comment on {TICKET} shortly"
    )
    assert again.already and again.describe().startswith("already queued:")
    assert len(bot.github.requests) == github_calls
    with transaction(bot.engine) as session:
        row_id = inbox.get(session, guid).id
        assert reposts.queued_for(session, [row_id]) == {row_id}
        task = inbox.get(session, reposts.queue_id(row_id))
        assert (task.source, task.event, task.ticket_key) == ("playbook", "repost", TICKET)

    bot.process(credentials=True)

    [comment] = bot.bot_comments()
    assert comment["body"] == f"{skipped.body}\n{MARKER}"
    first, done = bot.effects(guid)  # the post joins the delivery that skipped it
    assert (first.id, done.status, done.body) == (skipped.id, "done", skipped.body)
    assert loads(bot.engine) == [("pb-1", TICKET), ("pb-2", TICKET)]
    with transaction(bot.engine) as session:
        assert reposts.queued_for(session, [row_id]) == set()
        assert inbox.get(session, reposts.queue_id(row_id)).status == "done"
    with pytest.raises(repost.NothingToRepost):
        reposts.queue(with_them, guid)
    assert len(bot.github.calls("POST", f"/repos/{REPO}/issues/1/comments")) == 1


def test_done_comments_store_their_body(bot: Bot, cli) -> None:
    guid = bot.deliver()
    bot.process(credentials=True)
    [comment] = bot.bot_comments()
    [done] = bot.effects(guid)
    assert (done.action, done.status, done.purpose) == ("comment", "done", "lessons")
    assert f"{done.body}\n{MARKER}" == comment["body"]
    assert sorted(done.bullet_ids or []) == ["pb-1", "pb-2"]
    assert done.installation_id == INSTALLATION
    with transaction(bot.engine) as session:
        assert side_effects.unposted(session, guid) == []
    [logged] = json.loads(cli("deliveries", "show", guid).stdout)["side_effects"]
    assert (logged["status"], logged["body"]) == ("done", done.body)
    nothing = cli("deliveries", "repost", guid)
    assert nothing.exit_code == 1
    assert "it skipped no comment for missing credentials" in nothing.stderr


def test_dry_run_comments_store_their_body(bot: Bot) -> None:
    guid = bot.deliver()
    bot.process(credentials=False, dry_run=True)
    [tried] = bot.effects(guid)
    assert (tried.action, tried.status, tried.purpose) == ("comment", "dry_run", "lessons")
    assert (tried.body or "").startswith("### Lessons from the playbook")
    assert sorted(tried.bullet_ids or []) == ["pb-1", "pb-2"]
    with transaction(bot.engine) as session:
        assert side_effects.unposted(session, guid) == []


def test_a_later_delivery_with_newer_text_replaces_the_older_skipped_comment(
    bot: Bot, cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    older = bot.deliver()
    bot.process(credentials=False)
    with transaction(bot.engine) as session:
        lifecycle.add(
            session,
            "Spelling in the README is checked by the docs job",
            learned_from="x/y#2",
            scope=REPO,
            actor="seed",
        )
    newer = bot.deliver("edited")
    bot.process(credentials=False)
    [old_text], [new_text] = bot.effects(older), bot.effects(newer)
    assert old_text.body != new_text.body and "pb-3" in (new_text.body or "")
    with transaction(bot.engine) as session:
        assert side_effects.unposted(session, older) == []
        assert [e.id for e in side_effects.unposted(session, newer)] == [new_text.id]
    set_credentials(bot, monkeypatch)
    assert cli("deliveries", "repost", older).exit_code == 1
    assert cli("deliveries", "repost", newer).exit_code == 0
    [comment] = bot.bot_comments()
    assert comment["body"] == f"{new_text.body}\n{MARKER}"


def test_an_unknown_delivery_is_a_usage_error(cli) -> None:
    result = cli("deliveries", "repost", "no-such-delivery")
    assert result.exit_code == 2
    assert "no delivery 'no-such-delivery' in the inbox" in result.stderr

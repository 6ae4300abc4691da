"""A repository with `agents_md` on and lessons in the playbook, synced against fake GitHub."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import func, select

from bot import agents_md, repo_settings
from bot.agents_md import SyncReport
from bot.services import Services
from playbook.db import transaction
from playbook.lessons import lifecycle
from playbook.models import RuleFileSync, UsageEvent
from playbook.repos.syncs import BRANCH
from tests.fakes.github import FakeGitHub
from tests.loop_harness import Loop
from tests.payloads import INSTALLATION, REPO

SETTINGS_FILE = ".github/playbook-bot.yml"


@dataclass
class World:
    """The loop's fake GitHub and database, and the sync's services."""

    loop: Loop
    services: Services

    @property
    def github(self) -> FakeGitHub:
        """The fake GitHub the real PyGithub client talks to."""
        return self.loop.github

    def sync(self, **options: Any) -> SyncReport:
        """One sync of REPO, as the scheduler and the CLI run it."""
        return agents_md.sync(self.services, REPO, installation_id=INSTALLATION, **options)

    def settings(self, extra: str = "") -> None:
        """New `agents_md` settings pushed to REPO (the push marks the stored ones stale)."""
        enable(self.github, extra)
        repo_settings.mark_stale(self.loop.engine, REPO)

    def lesson(self, text: str, *, scope: str = REPO, **fields: Any) -> str:
        """An active lesson; returns its id."""
        with transaction(self.loop.engine) as session:
            return lifecycle.add(
                session, text, learned_from="CTMS-1", actor="seed", scope=scope, **fields
            ).bullet.id

    def deprecate(self, bullet_id: str, reason: str) -> None:
        """A lesson demoted, with its reason."""
        with transaction(self.loop.engine) as session:
            lifecycle.deprecate(session, bullet_id, reason=reason, actor="seed")

    def writes(self) -> list[tuple[str, str]]:
        """Every request that changed something on GitHub (tokens left out)."""
        return [
            (r.method, r.path)
            for r in self.github.requests
            if r.method != "GET" and "/access_tokens" not in r.path
        ]

    def sync_pulls(self) -> list[dict[str, Any]]:
        """The PRs opened from the sync branch, oldest first."""
        return [
            pull
            for (repo, _), pull in sorted(self.github.pulls.items())
            if repo == REPO and pull["head"].get("ref") == BRANCH
        ]

    def files_on(self, ref: str, directory: str) -> dict[str, bytes]:
        """Every file under ``directory`` at ``ref`` (a branch), by path."""
        store = self.github.git[REPO]
        head = store.refs.get(f"refs/heads/{ref}")
        if head is None:
            return {}
        flat = store.flatten(store.objects[head]["tree"])
        return {
            path: store.objects[sha]["data"]
            for path, (_, sha) in flat.items()
            if path.startswith(directory.rstrip("/") + "/")
        }

    def on_branch(self, path: str = "AGENTS.md") -> bytes | None:
        """The file as the sync branch has it."""
        return self.github.file_at(REPO, path, ref=BRANCH)

    def branch_commits(self) -> list[str]:
        """The sync branch's commits that main does not have, newest first."""
        main = set(self.github.commits_on(REPO, "main"))
        return [sha for sha in self.github.commits_on(REPO, BRANCH) if sha not in main]

    def state(self) -> RuleFileSync | None:
        """The sync's row, detached."""
        with transaction(self.loop.engine) as session:
            row = session.get(RuleFileSync, REPO)
            if row is not None:
                session.expunge(row)
            return row

    def cites(self) -> int:
        """How many cites the usage log holds."""
        with transaction(self.loop.engine) as session:
            return session.scalar(
                select(func.count()).select_from(UsageEvent).where(UsageEvent.kind == "cited")
            )


def enable(github: FakeGitHub, extra: str = "") -> None:
    """Turn `agents_md` on in REPO's settings file (``extra``: more keys of the block)."""
    github.put_file(REPO, SETTINGS_FILE, f"agents_md:\n  enabled: true\n{extra}".encode())


def world_for(loop: Loop, settings: str = "") -> World:
    """REPO on the loop's fake GitHub with `agents_md` enabled."""
    if REPO not in loop.github.repos:
        loop.github.add_repo(REPO)
    enable(loop.github, settings)
    return World(loop, Services(engine=loop.engine, settings=loop.settings))

"""Consolidation runs: each scope's size against its budget, and proposals for its overlaps.

A run finds groups of overlapping active lessons in a scope and stores one open proposal per
group (one transaction per scope), with the longest member as its draft; with a model set, each
new proposal also gets a merge job on the model's worker, which writes the model's draft later.
Nothing here changes a lesson: a maintainer accepts or rejects each proposal.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from bot import model_jobs
from playbook import db
from playbook.consolidation import budget, groups, store
from playbook.repos import settings as repo_files
from playbook.repos import stored

if TYPE_CHECKING:
    from sqlalchemy import Engine

    from bot.config import Settings
    from bot.services import Services

log = logging.getLogger(__name__)


class Configured(Protocol):
    """What a budget is read from: the services, the CLI's context or the web runtime."""

    @property
    def engine(self) -> Engine:
        """The playbook database."""

    @property
    def settings(self) -> Settings:
        """The installation's settings."""


def budget_for(services: Configured) -> Callable[[str], int]:
    """A scope's context budget: the smallest `context_budget` among the repositories whose
    settings map to that scope, else PLAYBOOK_CONTEXT_BUDGET.

    The smallest, because every one of those repositories' agents reads the same lessons: the
    scope must fit the tightest of them. Settings are read as last stored (no GitHub call).
    """
    default = services.settings.context_budget
    chosen: dict[str, int] = {}
    with db.transaction(services.engine) as session:
        for repo, _ in stored.known(session):
            values = stored.get(session, repo)
            try:
                settings, _ = repo_files.resolve(
                    values.get("org_values"), values.get("repo_values")
                )
            except ValueError:
                continue  # files stored under older rules: the defaults apply, as for the bot
            if settings.context_budget is None:
                continue
            scope, value = settings.scope_for(repo), settings.context_budget
            chosen[scope] = min(value, chosen.get(scope, value))
    return lambda scope: chosen.get(scope, default)


@dataclass
class ScopeRun:
    """One scope in a run: its size against its budget, and what was proposed or skipped."""

    scope: str
    lessons: int
    chars: int
    budget: int
    share: float
    over: bool
    groups: int = 0
    proposals: list[dict[str, Any]] = field(default_factory=list)
    skipped: str | None = None  # why the scope was not consolidated
    # Groups found but not proposed again (open, rejected or undone with the same members).
    already: int = 0
    queued: int = 0  # merge jobs queued for the model

    def as_dict(self) -> dict[str, Any]:
        """For `consolidate --json`."""
        return {
            "scope": self.scope,
            "lessons": self.lessons,
            "chars": self.chars,
            "budget": self.budget,
            "share": round(self.share, 4),
            "over": self.over,
            "groups": self.groups,
            "proposals": self.proposals,
            "already_proposed": self.already,
            "merge_jobs_queued": self.queued,
            "skipped": self.skipped,
        }


@dataclass
class Report:
    """What a run did, scope by scope."""

    dry_run: bool
    scopes: list[ScopeRun] = field(default_factory=list)

    @property
    def proposals(self) -> int:
        """How many proposals were made (or, in a dry run, would be)."""
        return sum(len(run.proposals) for run in self.scopes)

    def as_dict(self) -> dict[str, Any]:
        """For `consolidate --json`."""
        return {
            "dry_run": self.dry_run,
            "threshold": budget.THRESHOLD,
            "proposals": self.proposals,
            "scopes": [run.as_dict() for run in self.scopes],
        }


def run(services: Services, *, scope: str | None = None, dry_run: bool = False) -> Report:
    """Propose consolidations in ``scope`` (whatever its size), or in every scope past
    `budget.THRESHOLD` of its budget; ``dry_run`` stores and queues nothing."""
    budget_of = budget_for(services)
    with db.transaction(services.engine) as session:
        sizes = {size.scope: size for size in budget.scope_sizes(session, budget_of)}
    report = Report(dry_run=dry_run)
    if scope is not None:
        size = sizes.get(scope) or budget.ScopeSize(scope, 0, 0, budget_of(scope))
        report.scopes.append(_consolidate(services, size, dry_run))
        return report
    for size in sorted(sizes.values(), key=lambda s: s.scope):
        if not size.over:
            report.scopes.append(
                _run_of(size, skipped=f"under {budget.THRESHOLD:.0%} of its budget")
            )
            continue
        report.scopes.append(_consolidate(services, size, dry_run))
    return report


def _run_of(size: budget.ScopeSize, skipped: str | None = None) -> ScopeRun:
    return ScopeRun(
        scope=size.scope,
        lessons=size.lessons,
        chars=size.chars,
        budget=size.budget,
        share=size.share,
        over=size.over,
        skipped=skipped,
    )


def _consolidate(services: Services, size: budget.ScopeSize, dry_run: bool) -> ScopeRun:
    done = _run_of(size)
    queue = services.settings.model_enabled and not dry_run
    # One transaction per scope: its proposals and their merge jobs are stored together.
    with db.transaction(services.engine) as session:
        lessons = store.scope_lessons(session, size.scope)
        if len(lessons) < 2:
            done.skipped = "fewer than two active lessons"
            return done
        found = groups.find_groups(lessons)
        made = store.propose(session, size.scope, found, dry_run=dry_run)
        done.groups, done.already = len(found), len(found) - len(made)
        # A dry run's proposals are in no session: their members' texts are the run's own.
        texts = dict(lessons)
        done.proposals = [store.as_dict(proposal, members=False) for proposal in made]
        for shown in done.proposals:
            shown["members"] = [{"id": i, "text": texts.get(i)} for i in shown["member_ids"]]
        for proposal in made if queue else []:
            done.queued += model_jobs.queue_merge(session, proposal.id)
    if made and not dry_run:
        log.debug(
            "consolidate %s: %d proposals (%s)%s",
            size.scope,
            len(made),
            ", ".join(str(p["id"]) for p in done.proposals),
            f"; {done.queued} merge jobs queued for the model" if done.queued else "",
        )
    return done

"""Lessons for consolidation tests: one scope with a planted near-duplicate pair among distinct
lessons, a second scope with a pair of its own, and reads of what was proposed."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Engine, select

from playbook.db import transaction
from playbook.lessons import lifecycle
from playbook.models import Bullet, Consolidation, Delivery, RepoSettingsRow

SCOPE = "acme/api"
# The planted pair: the same instruction in two tickets' words; pb-1 is the longer.
RECONNECT = (
    "Reconnect the broker subscriber with exponential backoff after a failover, and log the new "
    "broker address"
)
JITTER = "After a broker failover, reconnect the subscriber using exponential backoff with jitter"
# What a good merge says: every instruction of both.
MERGED = (
    "After a broker failover, reconnect the subscriber using exponential backoff with jitter, "
    "and log the new broker address"
)
# Distinct lessons of the same scope (their own topics, some shared words): no group.
FILLER = (
    "Pin the chromium version in the CI image so that screenshot comparisons stay stable between "
    "runs; bump it deliberately in its own pull request with refreshed baselines.",
    "Run the database migrations as a separate release step before the API pods roll out, never "
    "from application startup, because two pods racing on one migration corrupt the schema table.",
    "Never hold a row lock across an HTTP call to the payment provider: commit first, call "
    "Stripe, then reopen a transaction to record its answer, or checkout deadlocks under load.",
    "Feature flags for billing live in LaunchDarkly under the billing project; a flag removed "
    "from code must be archived there within a week or the nightly audit job fails.",
    "Uploads larger than 5 MB go through the presigned S3 multipart path; the monolith's /upload "
    "endpoint buffers whole files in memory and the pods get OOM-killed.",
    "Translations are generated from the en.json catalogue by the i18n workflow; editing de.json "
    "or fr.json by hand is overwritten on the next sync and breaks plural rules.",
    "Time zones: store UTC in Postgres timestamptz columns and convert only in the React view "
    "layer with the user's profile zone, never with the browser's guess.",
    "The search indexer reads from the replica; after a bulk import call /admin/reindex with the "
    "import id, otherwise Elasticsearch keeps serving stale documents for hours.",
    "GraphQL resolvers must batch lookups through the DataLoader on the request context; a plain "
    "ORM call inside a list field issues one query per row and times out on big accounts.",
)
# The scope's characters: past 75% of a 2,000 budget (86%), far under the default 8,000 (21%).
SCOPE_CHARS = len(RECONNECT) + len(JITTER) + sum(len(text) for text in FILLER)

WEB = "acme/web"
LINT = "Run the linter with --fix before pushing, and commit the formatted files in the same commit"
LINT_AGAIN = (
    "Before you push, run the linter with its --fix flag and keep the formatting changes in that "
    "same commit"
)


def seed(engine: Engine) -> list[str]:
    """The acme/api lessons (pb-1 and pb-2 the pair, pb-3.. the filler); their ids."""
    return add(engine, SCOPE, RECONNECT, JITTER, *FILLER)


def add(engine: Engine, scope: str, *texts: str) -> list[str]:
    """Active lessons of ``scope``, each created (none refused as a duplicate)."""
    made = []
    with transaction(engine) as session:
        for text in texts:
            result = lifecycle.add(
                session, text, learned_from=f"{scope}#1", scope=scope, actor="seed"
            )
            assert result.created, text
            made.append(result.bullet.id)
    return made


def proposals(engine: Engine) -> list[dict[str, Any]]:
    """Every stored proposal, oldest first: id, scope, status, members, draft and its source."""
    with transaction(engine) as session:
        return [
            {
                "id": c.id,
                "scope": c.scope,
                "status": c.status,
                "member_ids": list(c.member_ids),
                "draft": c.draft,
                "draft_source": c.draft_source,
                "model": c.model,
                "dropped_terms": dict(c.dropped_terms or {}),
            }
            for c in session.scalars(select(Consolidation).order_by(Consolidation.id))
        ]


def merge_jobs(engine: Engine) -> list[tuple[str, str]]:
    """The model's merge jobs in the inbox: (delivery id, status), oldest first."""
    with transaction(engine) as session:
        rows = session.execute(
            select(Delivery.delivery_id, Delivery.status)
            .where(Delivery.source == "playbook", Delivery.event == "model.merge")
            .order_by(Delivery.id)
        )
        return [(delivery_id, status) for delivery_id, status in rows]


def status_of(engine: Engine, bullet_id: str) -> str:
    """A lesson's status now."""
    with transaction(engine) as session:
        bullet = session.get(Bullet, bullet_id)
        assert bullet is not None
        return bullet.status


def repo_budget(engine: Engine, repo: str, budget: int, scope: str | None = None) -> None:
    """``repo``'s settings file, as last read, sets `context_budget` (and maybe `scope`)."""
    values: dict[str, Any] = {"context_budget": budget}
    if scope is not None:
        values["scope"] = scope
    with transaction(engine) as session:
        session.add(RepoSettingsRow(repo=repo, repo_values=values, problems=[]))

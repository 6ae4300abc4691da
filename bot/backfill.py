"""Backfill: walk a repository's closed pull requests so a new install starts with signal."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta

from bot.handlers.pull_requests import apply_pull_request
from bot.worker import Services
from playbook import clock
from playbook.tracking import PullRequestState

log = logging.getLogger(__name__)


@dataclass
class BackfillReport:
    """How many closed PRs were looked at and applied."""

    seen: int = 0
    merged: int = 0
    closed_unmerged: int = 0


def backfill(services: Services, repo: str, since: timedelta) -> BackfillReport:
    """Apply links, lessons, cites and outcomes of PRs closed in the last ``since``.

    Uses the App's installation on the repo (or GITHUB_TOKEN). The same code as the
    webhook handler runs, so a PR later redelivered by GitHub changes nothing.
    """
    github = services.out.github  # type: ignore[attr-defined]
    installation_id = None
    if services.settings.github_app_id and github.configured:
        installation_id = github.integration().get_repo_installation(*repo.split("/", 1)).id
    client = github.for_installation(installation_id)
    cutoff: datetime = clock.now() - since
    report = BackfillReport()
    pulls = client.get_repo(repo).get_pulls(state="closed", sort="updated", direction="desc")
    for pull in pulls:
        updated = clock.to_utc(pull.updated_at)
        if updated < cutoff:
            break  # sorted by update time: everything after is older still
        state = "merged" if pull.merged_at else "closed"
        seen = PullRequestState(
            key=f"{repo}#{pull.number}",
            repo=repo,
            number=pull.number,
            title=pull.title or "",
            head_ref=pull.head.ref if pull.head else "",
            url=pull.html_url,
            state=state,
            updated_at=updated,
            closed_at=clock.to_utc(pull.closed_at) if pull.closed_at else None,
            merged_at=clock.to_utc(pull.merged_at) if pull.merged_at else None,
            installation_id=installation_id,
        )
        labels = [label.name for label in pull.labels or []]
        apply_pull_request(services, seen, pull.body, labels)
        report.seen += 1
        if state == "merged":
            report.merged += 1
        else:
            report.closed_unmerged += 1
    return report


def parse_since(text: str) -> timedelta:
    """``90d``, ``12h``, ``2w`` as a time span."""
    units = {"h": "hours", "d": "days", "w": "weeks"}
    value, unit = text[:-1], text[-1:].lower()
    if unit not in units or not value.isdigit() or int(value) <= 0:
        raise ValueError(f"{text!r} is not a span such as 90d, 12h or 2w")
    return timedelta(**{units[unit]: int(value)})

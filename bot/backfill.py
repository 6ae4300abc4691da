"""Backfill: walk a repository's closed pull requests so a new install starts with signal."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from bot import agents_md
from bot.handlers.context import Ignored
from bot.handlers.pull_news import apply_pull_request
from bot.services import Services
from playbook import clock
from playbook.outcomes import links, revert_signals
from playbook.outcomes.pull_outcome import Closer
from playbook.outcomes.tracking import PullRequestState
from playbook.repos.syncs import BRANCH

log = logging.getLogger(__name__)


@dataclass
class BackfillReport:
    """How many closed PRs were looked at and applied."""

    seen: int = 0
    merged: int = 0
    closed_unmerged: int = 0
    ignored: list[str] = field(default_factory=list)


def backfill(services: Services, repo: str, since: timedelta) -> BackfillReport:
    """Apply links, lessons, cites and outcomes of PRs closed in the last ``since``.

    Uses the App's installation on the repo (or GITHUB_TOKEN). The same code as the
    webhook handler runs, so a PR later redelivered by GitHub changes nothing. Each cite
    is recorded at the time GitHub gives for the text that made it (the PR's creation for
    its title and body, each comment's own), so freshness and prune see old work as old.
    """
    github = services.out.github  # type: ignore[attr-defined]
    installation_id = None
    if services.settings.github_app_id and github.configured:
        installation_id = github.integration().get_repo_installation(*repo.split("/", 1)).id
    client = github.for_installation(installation_id)
    cutoff: datetime = clock.now() - since
    report = BackfillReport()
    repository = client.get_repo(repo)
    pulls = repository.get_pulls(state="closed", sort="updated", direction="desc")
    window = []
    for pull in pulls:
        if clock.to_utc(pull.updated_at) < cutoff:
            break  # sorted by update time: everything after is older still
        window.append(pull)
    # Oldest closing first, as the webhooks arrived: a later merge for a ticket must win
    # over an earlier rejection, whatever order the API lists them in.
    window.sort(key=lambda pull: clock.to_utc(pull.merged_at or pull.closed_at or pull.updated_at))
    for pull in window:
        user = pull.user
        head = pull.head.ref if pull.head else None
        if head == BRANCH and agents_md.is_sync_pull(
            services,
            installation_id,
            head,
            user.login if user else None,
            user.type if user else None,
        ):
            report.ignored.append(f"{repo}#{pull.number} is the bot's AGENTS.md sync PR")
            continue
        state = "merged" if pull.merged_at else "closed"
        seen = PullRequestState(
            key=f"{repo}#{pull.number}",
            repo=repo,
            number=pull.number,
            title=pull.title or "",
            head_ref=pull.head.ref if pull.head else "",
            url=pull.html_url,
            state=state,
            updated_at=clock.to_utc(pull.updated_at),
            closed_at=clock.to_utc(pull.closed_at) if pull.closed_at else None,
            merged_at=clock.to_utc(pull.merged_at) if pull.merged_at else None,
            installation_id=installation_id,
            head_sha=revert_signals.commit_sha(pull.head.sha if pull.head else None),
            merge_commit_sha=revert_signals.commit_sha(pull.merge_commit_sha),
        )
        closer = None
        if state == "closed":
            # The pulls API does not say who closed a PR; its issue does.
            by = repository.get_issue(pull.number).closed_by
            closer = Closer(
                login=by.login if by else None,
                is_bot=bool(by and by.type == "Bot"),
                opener=pull.user.login if pull.user else None,
            )
        labels = [label.name for label in pull.labels or []]
        try:
            apply_pull_request(
                services,
                seen,
                pull.body,
                labels,
                closer,
                written_at=written_at(pull),
                comments=comments_while_open(pull, seen),
                merger=lambda pull=pull: merged_by(pull),
                author=pull.user.login if pull.user else None,
            )
        except Ignored as why:
            report.ignored.append(str(why))
        report.seen += 1
        if state == "merged":
            report.merged += 1
        else:
            report.closed_unmerged += 1
    return report


def merged_by(pull: Any) -> Closer:
    """Who merged a PR: the pulls list leaves it out, so PyGithub reads the PR (one call)."""
    by = pull.merged_by
    return Closer(
        login=by.login if by else None,
        is_bot=bool(by and by.type == "Bot"),
        opener=pull.user.login if pull.user else None,
    )


def written_at(pull: Any) -> datetime | None:
    """When a PR's title and body were written: its creation, else the earliest time known."""
    if pull.created_at is not None:
        return clock.to_utc(pull.created_at)
    known = [t for t in (pull.merged_at, pull.closed_at, pull.updated_at) if t is not None]
    return min(clock.to_utc(t) for t in known) if known else None


def comments_while_open(pull: Any, seen: PullRequestState) -> list[tuple[str, datetime]]:
    """The PR's conversation comments written by people up to its closing, with their times.

    These are the cites the webhook handler counted while the PR was open; the outcome
    rates them. Bots' comments are skipped as the handler skips them (the bot's own
    replies name lesson ids without citing them), and so are comments after the closing.
    """
    closed = seen.merged_at or seen.closed_at
    found = []
    for comment in pull.get_issue_comments():
        if comment.user is None or comment.user.type == "Bot" or comment.created_at is None:
            continue
        at = clock.to_utc(comment.created_at)
        if closed is not None and at > closed:
            continue
        # Bounded as webhook payloads are (GitHub's own limit), before any parsing.
        found.append(((comment.body or "")[: links.BODY_CHARS], at))
    return found


# Longer than anything worth looking back over, and far inside what a datetime can subtract.
MAX_SPAN = timedelta(days=100 * 365)


def parse_since(text: str) -> timedelta:
    """``90d``, ``12h``, ``2w`` as a time span (up to MAX_SPAN)."""
    units = {"h": 3600, "d": 86400, "w": 7 * 86400}
    value, unit = text[:-1].lstrip("0"), text[-1:].lower()
    if unit not in units or not value.isascii() or not value.isdigit():
        raise ValueError(f"{text[:20]!r} is not a span such as 90d, 12h or 2w")
    # Compared in seconds first: timedelta overflows on a long enough number, and int()
    # refuses one of thousands of digits.
    if len(value) > 12 or int(value) * units[unit] > MAX_SPAN.total_seconds():
        raise ValueError(f"{text[:20]!r} is longer than {MAX_SPAN.days // 365} years")
    return timedelta(seconds=int(value) * units[unit])

"""What a pull request is evidence of: cites of lessons, lessons captured, and their scope."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.orm import Session

from playbook import clock
from playbook.lessons import lifecycle, secrets
from playbook.lessons.capture import lessons_in, without_feedback
from playbook.models import Bullet
from playbook.outcomes import pull_reach, tracking, unreviewed, usage
from playbook.outcomes.links import bullet_ids, pull_request_links
from playbook.outcomes.tracking import PullRequestState

log = logging.getLogger(__name__)
# Who changes the playbook when a PR's evidence does (captured lessons, demotions).
ACTOR = "playbook-bot"


def scope_of(ticket: str, repo: str) -> str:
    """Lessons learned from a Jira ticket serve its project; from a GitHub issue, its repo."""
    return repo if "#" in ticket else ticket.rsplit("-", 1)[0]


def cite(
    session: Session,
    pr_key: str,
    ticket: str | None,
    text: str | None,
    origin: str,
    at: datetime | None = None,
    *,
    credit_replacement: bool = False,
) -> int:
    """Record the bullet ids in ``text`` as cites made in a PR, once per PR and bullet.

    A PR that names pb-12 in its body, a commit and a review is one piece of evidence
    about pb-12, so its outcome is one rating, not three. ``at`` is when the text was
    written (backfill reads it from GitHub); by default, now. With ``credit_replacement``
    (PLAYBOOK_SUPERSEDED_CITES_COUNT_FOR_REPLACEMENT), a cite of a lesson superseded by then
    cites its replacement too, and the PR's outcome rates both. A lesson out of the PR's reach
    (another owner's repository scope, `pull_reach.may_touch`) is never a cite.
    """
    # A `/playbook helpful|unhelpful pb-3` line judges pb-3's fit; it did not use it.
    ids = bullet_ids(without_feedback(text))
    if not ids:
        return 0
    # Only lessons this PR's repository may touch (`pull_reach`): an ``evil/app`` PR naming
    # a ``victim/secret`` lesson cites nothing, exactly as if the id did not exist.
    repo = pull_reach.repo_of(pr_key)
    reached = pull_reach.touchable(session, repo, ids)
    refused = [bullet_id for bullet_id in ids if bullet_id not in reached]
    if refused:
        log.info(
            "%s mentions bullet ids %s, unknown or out of its reach; not cites",
            pr_key,
            ", ".join(refused),
        )
    ids = reached
    if not ids:
        return 0
    when = min(clock.to_utc(at), clock.now()) if at is not None else None
    if credit_replacement:
        # A replacement is credited under the same rule: a link made before it was enforced
        # must not carry a cite across owners.
        ids = pull_reach.touchable(session, repo, usage.with_replacements(session, ids, when))
    events = usage.record(
        session,
        "cited",
        ids,
        ticket_key=ticket,
        phase=origin,
        consumer="github",
        pr_key=pr_key,
        # A time from a payload or the API is GitHub's word, but never later than now: a
        # cite from the future would look fresh, and keep its lesson from pruning, forever.
        ts=when,
        dedup_keys=[usage.once_key("cited", pr_key, i) for i in ids],
    )
    return len(events)


def cite_later(
    session: Session,
    pr_key: str,
    text: str | None,
    origin: str,
    *,
    credit_replacement: bool = False,
) -> int:
    """Record the cites in a text written in a PR after it was opened (a comment, review, commit).

    They count for the first ticket the PR was linked to, as its body's cites usually do.
    ``credit_replacement``: see `cite`.
    """
    tickets = tracking.tickets_of(session, pr_key)
    ticket = tickets[0] if tickets else None
    return cite(session, pr_key, ticket, text, origin, credit_replacement=credit_replacement)


@dataclass(frozen=True)
class Skipped:
    """A Lessons-section item left out because it holds a credential (never the value)."""

    item: int  # its place in the section, from 1
    holds: str  # what and where, e.g. "a GitHub token (line 1, characters 12-51)"


def _captured_before(session: Session, url: str | None) -> list[str]:
    """The texts of the lessons captured from the PR at ``url`` (any status)."""
    if not url:
        return []
    return list(session.scalars(select(Bullet.text).where(Bullet.source_url == url)))


def _new(text: str, earlier: Sequence[str]) -> bool:
    return all(lifecycle.word_overlap(text, old) < lifecycle.DUPLICATE_OVERLAP for old in earlier)


def uncaptured(session: Session, body: str | None, url: str | None) -> bool:
    """Whether the body's Lessons section holds a lesson not captured from this PR yet.

    Asked before `record`, so that what a new lesson needs from outside (the PR's files, for
    its anchors) is read only when one will be captured, not on every edit of the PR.
    """
    lessons = lessons_in(body)
    if not lessons:
        return False
    earlier = _captured_before(session, url)
    return any(_new(text, earlier) for text in lessons)


def capture(
    session: Session,
    body: str | None,
    ticket: str,
    repo: str,
    url: str | None,
    skipped: list[Skipped] | None = None,
    *,
    author: str | None = None,
    author_may_write: bool = True,
    paths: Sequence[str] | None = None,
) -> list[str]:
    """Add the lessons of the body's Lessons section as proposed bullets; returns new ids.

    A lesson already captured from this PR (in any status) is not captured again, so
    an "opened" delivered after "closed" cannot bring back a demoted lesson. An item that
    holds a credential is left out, the others captured, and noted in ``skipped``.
    Unless ``author_may_write``, the lessons are marked as the words of an ``author``
    without write access: no outcome approves them (``unreviewed``), a maintainer does.
    ``paths`` anchors the new lessons (`playbook.anchors.capture`: the PR's files).
    """
    reason = f"Lessons section of {url or ticket}"
    if not author_may_write:
        reason = unreviewed.capture_reason(reason, author)
    added = []
    earlier = _captured_before(session, url)
    for item, text in enumerate(lessons_in(body), start=1):
        if not _new(text, earlier):
            continue
        try:
            result = lifecycle.add(
                session,
                text,
                learned_from=ticket,
                actor=ACTOR,
                scope=scope_of(ticket, repo),
                status="proposed",
                source="pr_body",
                source_url=url,
                reason=reason,
                paths=list(paths) if paths else None,
            )
        except secrets.HoldsCredential as refused:  # refused before anything was written
            if skipped is not None:
                skipped.append(Skipped(item, secrets.summary(refused.findings)))
            continue
        if result.created:
            added.append(result.bullet.id)
            earlier.append(text)
    return added


@dataclass(frozen=True)
class Recorded:
    """What ``record`` stored about a PR's news."""

    state: str  # the PR's state as stored, which an older delivery does not move back
    news: bool
    applied: str | None  # the outcome key applied already
    tickets: list[str]
    added: list[str]
    cited: int
    skipped: tuple[Skipped, ...] = ()  # Lessons-section items holding a credential
    primary: str | None = None  # the ticket its lessons and cites count for


def record(
    session: Session,
    seen: PullRequestState,
    body: str | None,
    *,
    written_at: datetime | None = None,
    comments: Sequence[tuple[str | None, datetime | None]] = (),
    scope: str | None = None,
    credit_replacement: bool = False,
    author: str | None = None,
    author_may_write: bool = True,
    paths: Sequence[str] | None = None,
) -> Recorded:
    """Store what any news about a PR says: its state, linked tickets, lessons and cites.

    Lessons and cites go to the PR's primary ticket: the first it names that it is linked
    to. ``written_at`` is when the body was written and ``comments`` the PR's comments with
    their times (backfill), so each cite is recorded when it was made. ``scope`` is the
    repository's lessons scope when its settings file names one (default: the repository).
    ``credit_replacement``: see `cite`. ``author`` wrote the body; unless
    ``author_may_write`` its lessons wait for a maintainer (see `capture`). ``paths``
    anchors the lessons captured now.
    """
    links = pull_request_links(seen.title, seen.head_ref, body, seen.repo)
    kinds = [(key, "jira") for key in links.jira_keys] + [(key, "closes") for key in links.closes]
    pull, news = tracking.observe(session, seen)
    tickets = tracking.link(session, seen.key, kinds)
    primary = next((t for t in links.tickets if t in tickets), tickets[0] if tickets else None)
    skipped: list[Skipped] = []
    added = capture(
        session,
        body,
        primary or seen.key,
        scope or seen.repo,
        seen.url,
        skipped,
        author=author,
        author_may_write=author_may_write,
        paths=paths,
    )
    credit = {"credit_replacement": credit_replacement}
    cited = cite(
        session, seen.key, primary, f"{seen.title}\n{body or ''}", "pr", written_at, **credit
    )
    for text, at in comments:
        cited += cite(session, seen.key, primary, text, "comment", at, **credit)
    return Recorded(
        pull.state, news, pull.outcome_evidence, tickets, added, cited, tuple(skipped), primary
    )

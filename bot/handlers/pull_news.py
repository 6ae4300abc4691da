"""A PR's news, for its handler and backfill: facts gathered through effects, the domain decides."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import datetime
from typing import TYPE_CHECKING

from bot import lesson_anchors, model_jobs, repo_settings, review_feedback
from bot.effects import TicketRef
from bot.handlers import lesson_refusals
from bot.handlers.context import Ignored, effect
from playbook import db
from playbook.experiment import outcomes as experiment_outcomes
from playbook.lessons.capture import lessons_in
from playbook.outcomes import evidence, pull_outcome, reverts
from playbook.outcomes.pull_outcome import Access, Closer, Need, PullFacts, Step
from playbook.outcomes.tracking import PullRequestState

if TYPE_CHECKING:
    from bot.services import Services

# The lines keep the name they have always been logged under, whichever caller runs them.
log = logging.getLogger("bot.handlers.pull_requests")


def _ref(seen: PullRequestState) -> TicketRef:
    return TicketRef.github(seen.repo, seen.number, seen.installation_id)


def closer_access(services: Services, seen: PullRequestState, login: str) -> Access:
    """The closer's access to the PR's repository, as GitHub answers it."""
    ref = TicketRef.github(seen.repo, seen.number, seen.installation_id)
    checked, allowed = effect(
        services, ref, "check_permission", lambda: services.out.can_change_playbook(ref, login)
    )
    if not checked:
        return Access.UNKNOWN
    return Access.WRITE if allowed else Access.NONE


def author_may_write(
    services: Services, seen: PullRequestState, author: str | None, body: str | None
) -> bool:
    """Whether the PR's author may have its Lessons section become active when it merges.

    Yes for a login of PLAYBOOK_AGENT_LOGINS (the operator named it) and for an author GitHub's
    permission API says can write to the repository. No for anyone else, and when nobody can
    ask (GitHub not configured, the author unknown): a fork's contributor, or a read-only
    author of a branch in the repository, writes words no merge reviewed. Asked only when
    the body has lessons to capture. What the payload says of the author (its
    ``author_association``, its head repository) is never taken for an answer.
    """
    if not lessons_in(body):
        return True  # nothing to capture: no question worth an API call
    if not author:
        return False
    if author.lower() in {agent.lower() for agent in services.settings.agents}:
        return True
    ref = TicketRef.github(seen.repo, seen.number, seen.installation_id)
    checked, allowed = effect(
        services,
        ref,
        "check_author_permission",
        lambda: services.out.can_change_playbook(ref, author),
    )
    return bool(checked and allowed)


def ticket_flagged(services: Services, tickets: list[str], installation_id: int | None) -> bool:
    """Whether one of the PR's tickets is flagged for review; asks until one is."""
    for ticket in tickets:
        if "#" in ticket:
            ticket_repo, number = ticket.rsplit("#", 1)
            ref = TicketRef.github(ticket_repo, int(number), installation_id)
        else:
            ref = TicketRef.jira(ticket)
        done, is_flagged = effect(
            services, ref, "check_review_flag", lambda r=ref: services.out.flagged_for_review(r)
        )
        if done and is_flagged:
            return True
    return False


def apply_pull_request(
    services: Services,
    seen: PullRequestState,
    body: str | None,
    labels: list[str],
    closer: Closer | None = None,
    *,
    written_at: datetime | None = None,
    comments: Sequence[tuple[str | None, datetime | None]] = (),
    merger: Callable[[], Closer] | None = None,
    author: str | None = None,
) -> None:
    """What any news about a PR means: links, captured lessons, cites, and its outcome.

    Shared by the webhook handler and `backfill`, which walks closed PRs through the API
    and passes when the body was written (``written_at``) and the PR's comments with their
    times, so each cite is recorded when it was made, before the outcome settles it.
    The outcome is ``pull_outcome.decide``'s; an outside fact it needs is gathered here,
    and ``pull_outcome.apply`` applies it once per closing. Raises Ignored when the
    closing does not count. ``merger`` says who merged the PR when ``closer`` is not
    given (backfill: the pulls list does not), asked only for a revert's merge.
    ``author`` opened the PR and wrote its body: unless they may write to the repository
    (``author_may_write``), its lessons stay proposed until a maintainer approves them.
    A lesson captured now is anchored to the PR's changed files (`lesson_anchors`).
    """
    # The repository's settings file may name its lessons scope and its demotion policy.
    own = repo_settings.effective(services, seen.repo, seen.installation_id)
    may_write = author_may_write(services, seen, author, body)
    with db.transaction(services.engine) as session:
        new_lessons = evidence.uncaptured(session, body, seen.url)
    # Read only when a lesson will be captured: most deliveries capture none.
    paths = lesson_anchors.of_pull(services, _ref(seen)) if new_lessons else None
    with db.transaction(services.engine) as session:
        recorded = evidence.record(
            session,
            seen,
            body,
            written_at=written_at,
            comments=comments,
            scope=own.scope,
            credit_replacement=services.settings.superseded_cites_count_for_replacement,
            author=author,
            author_may_write=may_write,
            paths=paths,
        )
        # Before the refresh: a revert is no attempt at the ticket its title quotes.
        reverted = reverts.note(session, seen, body, news=recorded.news)
        # Every action, not only closings: an opened PR makes its tickets "open", a link added
        # by an edit brings a merge already stored. From the truth, so redeliveries agree.
        experiment_outcomes.refresh(session, recorded.tickets)
    log.info(
        "%s (%s): tickets %s, %d lessons captured, %d cites",
        seen.key,
        recorded.state,
        ", ".join(recorded.tickets) or "none",
        len(recorded.added),
        recorded.cited,
    )
    lesson_refusals.reply_on_pull(services, seen, recorded.skipped)
    settings = services.settings
    facts = PullFacts(
        seen=seen,
        news=recorded.news,
        applied=recorded.applied,
        closer=closer or Closer(None),
        agents=frozenset(settings.agents),
        policy=own.settings.demote_policy or settings.demote_policy,
        labels=tuple(labels),
        review_label=settings.review_label,
        reverts=reverted,
    )
    verdict = pull_outcome.decide(facts)
    if recorded.state == "merged" and verdict.step not in (Step.WAIT, Step.APPLIED):
        if reverted is None:
            # Neither body nor branch names a reverted PR: git's own text in the commits may.
            reverted = reverted_in_commits(services, seen)
        if reverted is not None and closer is None and merger is not None:
            closer = merger()
        facts = replace(facts, reverts=reverted, closer=closer or Closer(None))
        verdict = pull_outcome.decide(facts)
    while verdict.step is Step.ASK:
        if verdict.need is Need.ACCESS:
            facts = replace(facts, access=closer_access(services, seen, facts.closer.login or ""))
        else:
            flagged = ticket_flagged(services, recorded.tickets, seen.installation_id)
            facts = replace(facts, ticket_flagged=flagged)
        verdict = pull_outcome.decide(facts)
    if verdict.step is Step.WAIT:
        return
    if verdict.step is Step.APPLIED:
        log.info("%s: the outcome of this %s was applied already", seen.key, recorded.state)
        return
    if verdict.step is Step.IGNORED:
        raise Ignored(verdict.reason)
    with db.transaction(services.engine) as session:
        outcome = pull_outcome.apply(session, verdict)
        changes = reverts.follow(session, seen.key, bot=verdict.bot) if outcome else []
    if outcome is None:
        return  # another worker applied it meanwhile
    log.info(
        "%s %s: demoted %s, restored %s, approved %s, %d cites settled%s",
        seen.key,
        recorded.state,
        outcome.demoted or "none",
        outcome.restored or "none",
        outcome.approved or "none",
        outcome.settled,
        f"; kept {outcome.kept_because}" if outcome.kept_because else "",
    )
    for change in changes:
        log_revert(change)
    # Once per close, after its outcome: a failed read costs the proposals, never the outcome.
    review_feedback.propose_from_reviews(services, seen, recorded, own, closer)
    # The model rates what was shown for the PR's tickets later, on its own worker.
    if recorded.tickets:
        model_jobs.queue_rating(services, seen.key)


def reverted_in_commits(services: Services, seen: PullRequestState) -> str | None:
    """Link a merged PR to the merged PR its commits revert, reading them once (one API call)."""
    ref = TicketRef.github(seen.repo, seen.number, seen.installation_id)
    done, found = effect(services, ref, "read_commits", lambda: services.out.commit_messages(ref))
    if not done or not found:
        return None
    with db.transaction(services.engine) as session:
        return reverts.link_commits(session, seen.key, found)


def log_revert(change: reverts.RevertChange) -> None:
    """One line per PR whose revert came or went, naming both PRs."""
    if change.now is not None:
        what = f"reverted by {change.now}"
    else:
        what = f"no longer reverted: {change.was} was reverted"
    log.info(
        "%s %s: demoted %s, restored %s, %d cites settled%s",
        change.pull,
        what,
        change.demoted or "none",
        change.restored or "none",
        change.settled,
        f"; kept {change.kept_because}" if change.kept_because else "",
    )

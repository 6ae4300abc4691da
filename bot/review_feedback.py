"""Proposals from a closed PR's review feedback: the GitHub reads, each an effect, then the domain.

When a PR linked to a ticket closes and its outcome is applied (once per close, so a redelivery
or a backfill re-run proposes nothing new), three lists are read: the reviews that requested
changes, the review comments on lines, and the conversation (whose last comment is the closing
comment of an unmerged close). Who counts and what is proposed is `playbook.reviews.proposals`'.
A read that fails is logged as failed and leaves the outcome as it was applied. The model's
reflection job reads strictly instead: a failed read fails the job (retried before the model is
asked about half the feedback), as it is no outcome's.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from bot import model_jobs
from bot.effects import TicketRef, read_softly
from bot.handlers.context import PermanentError, effect
from playbook import db
from playbook.outcomes import evidence
from playbook.outcomes.pull_outcome import Closer
from playbook.outcomes.tracking import PullRequestState
from playbook.reviews import proposals
from playbook.reviews.capture_from import CaptureFrom
from playbook.reviews.proposals import Feedback

if TYPE_CHECKING:
    from bot.repo_settings import Effective
    from bot.services import Services

# Logged under the handler's name, with the outcome's lines it follows.
log = logging.getLogger("bot.handlers.pull_requests")
T = TypeVar("T")
# `_read` or `_strict`: how a read's failure ends.
Reader = Callable[["Services", TicketRef, str, Callable[[], Any]], Any]
_ACTIONS = {
    proposals.REVIEW: "read_reviews",
    proposals.LINE: "read_review_comments",
    proposals.CONVERSATION: "read_comments",
}


def _read(services: Services, ref: TicketRef, action: str, call: Callable[[], T]) -> T | None:
    """An effect whose failure is logged as failed and answers None, instead of raising: a
    GitHub that fails here fails only the proposals, never the outcome applied before."""
    return read_softly(
        services.engine, services.out.dry_run, ref, action, call, "no proposals from it", log
    )


def _strict(services: Services, ref: TicketRef, action: str, call: Callable[[], T]) -> T | None:
    """An effect whose failure raises, for the worker to classify (a 502 is retried)."""
    done, result = effect(services, ref, action, call)
    if not done:
        raise PermanentError(f"cannot read {ref.key} from GitHub (its credentials are not set)")
    return result


def _writers(services: Services, ref: TicketRef, logins: list[str], read: Reader) -> set[str]:
    """The logins with write access, asked once each (the list is distinct already)."""
    found = set()
    for login in logins:
        allowed = read(
            services,
            ref,
            "check_permission",
            lambda who=login: services.out.can_change_playbook(ref, who),
        )
        if allowed:
            found.add(login)
    return found


def trusted_feedback(
    services: Services, ref: TicketRef, opener: str | None, *, strict: bool = False
) -> list[Feedback]:
    """The feedback on a PR by people with write access (never its author, a bot or the bot).

    ``strict`` (the model's job): a read that fails raises instead of costing its feedback.
    """
    limit = proposals.MAX_PER_KIND
    feedback: list[Feedback] = []
    authors = {opener}
    reader: Reader = _strict if strict else _read
    for kind, action in _ACTIONS.items():
        read = reader(
            services,
            ref,
            action,
            lambda kind=kind: services.out.pull_feedback(ref, kind, limit),
        )
        if read is not None:
            authors.add(read.author)
            feedback.extend(read.items)
    # The bot's own comments come marked as a bot's (`LiveEffects.pull_feedback`).
    asked = proposals.candidates(feedback, authors, None)
    writers = _writers(services, ref, asked, reader)
    return proposals.trusted(feedback, writers)


def capture_mode(services: Services, own: Effective) -> CaptureFrom:
    """How this repository's review feedback becomes proposals; `model` needs a model set.

    A repository's settings file may ask for the model where the server has none: its
    feedback then goes to the heuristic, said once per PR in the log.
    """
    mode = own.settings.capture_from_reviews or services.settings.capture_from_reviews
    if mode is CaptureFrom.MODEL and not services.settings.model_enabled:
        log.info("capture_from_reviews is 'model' but no model endpoint is set: using heuristic")
        return CaptureFrom.HEURISTIC
    return mode


def propose_from_reviews(
    services: Services,
    seen: PullRequestState,
    recorded: evidence.Recorded,
    own: Effective,
    closer: Closer | None,
) -> proposals.Proposals | None:
    """Propose the rules of the trusted feedback on a closed PR; None when nothing is read.

    With the model, nothing is read here: one reflection job is queued for the model's worker.
    """
    mode = capture_mode(services, own)
    if mode is CaptureFrom.OFF or not recorded.tickets or seen.state not in ("merged", "closed"):
        return None
    ticket = recorded.primary or recorded.tickets[0]
    scope = evidence.scope_of(ticket, own.scope)
    opener = closer.opener if closer else None
    if mode is CaptureFrom.MODEL:
        model_jobs.queue_reflection(services, seen, ticket, scope, opener)
        return None
    ref = TicketRef.github(seen.repo, seen.number, seen.installation_id)
    feedback = trusted_feedback(services, ref, opener)
    with db.transaction(services.engine) as session:
        done = proposals.propose(session, feedback, ticket=ticket, scope=scope, pr_key=seen.key)
    log.info(done.summary(seen.key))
    return done

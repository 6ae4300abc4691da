"""The model's worker runs these: rate what a closed PR was shown, reflect on its review feedback.

Queued by `bot.model_jobs` after a PR's outcome is applied; each asks the model once (within
the daily budget) and ends as ratings or proposals, never as an active lesson, a demotion or a
comment. How a failed call ends the job is `bot.model_jobs.ask`'s.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from bot import metrics, model_jobs, review_feedback
from bot.effects import TicketRef
from bot.handlers.context import Ignored, PermanentError, effect
from bot.handlers.router import Event, Router
from playbook import db
from playbook.models import PullRequest
from playbook.outcomes import tracking
from playbook.ratings import prompt, store, targets
from playbook.reviews import proposals, reflection

if TYPE_CHECKING:
    from bot.services import Services

log = logging.getLogger(__name__)

router = Router()


def _pull(event: Event, session: Any) -> PullRequest:
    key = event.payload.get("pr")
    if not isinstance(key, str) or not key:
        raise PermanentError("the model job names no pull request")
    pull = session.get(PullRequest, key)
    if pull is None:
        raise Ignored(f"{key} is not a pull request the bot has seen")
    return pull


@router.register(model_jobs.SOURCE, model_jobs.RATE)
def rate_what_was_shown(event: Event, services: Services) -> None:
    """Rate each lesson shown for the PR's tickets that it did not cite, in one model call."""
    with db.transaction(services.engine) as session:
        pull = _pull(event, session)
        key, ref = pull.key, TicketRef.github(pull.repo, pull.number, pull.installation_id)
        tickets = tracking.tickets_of(session, key)
        lessons = [(b.id, b.text) for b in targets.to_rate(session, key, tickets)]
    if not lessons:
        raise Ignored(f"nothing to rate on {key}: every lesson shown was cited or rated already")
    if not services.settings.model_enabled:
        raise Ignored("no model endpoint is set (PLAYBOOK_MODEL_BASE_URL and PLAYBOOK_MODEL)")
    diff = services.settings.model_send_diffs
    done, read = effect(services, ref, "read_pull", lambda: services.out.pull_work(ref, diff))
    if not done:
        raise PermanentError(f"cannot read {key} from GitHub (its credentials are not set)")
    if read is None:
        raise Ignored(f"{key} is gone from GitHub: nothing to rate it by")
    work = prompt.Work.bounded(read.title, read.body, read.commits, read.diff)
    answer = model_jobs.ask(
        services,
        "rating",
        prompt.messages(lessons, work),
        prompt.RatingAnswer,
        max_tokens=prompt.MAX_ANSWER_TOKENS,
    )
    scored, dropped = prompt.scored(answer.value, [lesson_id for lesson_id, _ in lessons])
    with db.transaction(services.engine) as session:
        added = store.record(
            session,
            scored,
            pr_key=key,
            ticket_key=tickets[0] if tickets else None,
            model=answer.model,
            prompt_version=prompt.PROMPT_VERSION,
        )
    metrics.ratings_recorded([s.score for s in scored if s.bullet_id in added])
    log.info(
        "%s: %d of %d lessons shown rated by %s (%s)%s",
        key,
        len(added),
        len(lessons),
        answer.model,
        ", ".join(f"{s.bullet_id} {s.score:+.2f}" for s in scored if s.bullet_id in added)
        or "none",
        f"; {dropped} ratings of lessons not asked about dropped" if dropped else "",
    )


@router.register(model_jobs.SOURCE, model_jobs.REFLECT)
def reflect_on_reviews(event: Event, services: Services) -> None:
    """Up to three proposals from the PR's trusted review feedback, each resting on a quote."""
    ticket, scope = event.payload.get("ticket"), event.payload.get("scope")
    opener = event.payload.get("opener")
    if not isinstance(ticket, str) or not isinstance(scope, str):
        raise PermanentError("the reflection job names no ticket or scope")
    with db.transaction(services.engine) as session:
        pull = _pull(event, session)
        key, title = pull.key, pull.title
        ref = TicketRef.github(pull.repo, pull.number, pull.installation_id)
    # Strict: a failed read fails the job (retried) before the model hears half the feedback.
    feedback = review_feedback.trusted_feedback(
        services, ref, opener if isinstance(opener, str) else None, strict=True
    )
    if not feedback:
        raise Ignored(f"no review feedback on {key} by people with write access")
    if not services.settings.model_enabled:
        # Queued while a model was set, run after it was unset: the heuristic's, as at a close.
        with db.transaction(services.engine) as session:
            done = proposals.propose(session, feedback, ticket=ticket, scope=scope, pr_key=key)
        log.info("%s (no model endpoint is set: by the heuristic)", done.summary(key))
        return
    answer = model_jobs.ask(
        services,
        "reflection",
        reflection.messages(feedback, title),
        reflection.ReflectionAnswer,
        max_tokens=reflection.MAX_ANSWER_TOKENS,
    )
    checked = reflection.checked(answer.value, feedback)
    with db.transaction(services.engine) as session:
        done = proposals.propose_texts(
            session, checked.kept, ticket=ticket, scope=scope, pr_key=key, source=reflection.SOURCE
        )
    for _ in range(checked.invented_quotes):
        done.skip("quote not in the feedback")
    for _ in range(checked.over_cap):
        done.skip("over the model's cap")
    for _ in range(checked.too_long):
        done.skip("too long")
    metrics.model_quotes_dropped(checked.invented_quotes)
    log.info(done.summary(key).replace("from review feedback", "by the model from review feedback"))

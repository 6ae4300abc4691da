"""Model jobs: queued on the inbox after a PR closes, run by the model's own worker, budgeted.

A job is an inbox row of the bot's own (source "playbook", event "model.rate" or
"model.reflect", one delivery id per PR; "model.merge", one per consolidation proposal), so it
has the inbox's leases, retries with backoff, dead letters, `deliveries show` and
/ui/deliveries. It is inserted if absent: a redelivered close, a backfill or a second worker
never asks the model twice for one PR. Nothing here runs inside a webhook request or a
delivery's handler: those only queue.
"""

from __future__ import annotations

import json
import logging
from datetime import timedelta
from typing import TYPE_CHECKING, TypeVar

import pydantic

from bot import metrics, model_client
from bot.model_client import Answer, ModelError, Usage
from bot.outcomes import Deferred, Ignored, PermanentError, Transient
from playbook import clock, db, model_usage
from playbook.deliveries import inbox
from playbook.ratings import backfill

if TYPE_CHECKING:
    from sqlalchemy.orm import Session

    from bot.services import Services
    from playbook.outcomes.tracking import PullRequestState

log = logging.getLogger(__name__)
T = TypeVar("T", bound=pydantic.BaseModel)

SOURCE = inbox.JOB_SOURCE
RATE = f"{inbox.MODEL_EVENT_PREFIX}rate"
REFLECT = f"{inbox.MODEL_EVENT_PREFIX}reflect"
MERGE = f"{inbox.MODEL_EVENT_PREFIX}merge"
# A 429 without Retry-After waits this long before the job is tried again.
RATE_LIMIT_WAIT = timedelta(minutes=1)


def rate_id(pr_key: str) -> str:
    """The delivery id of a PR's rating job: one per PR, ever."""
    return f"rate:{pr_key}"


def reflect_id(pr_key: str) -> str:
    """The delivery id of a PR's reflection job: one per PR, ever."""
    return f"reflect:{pr_key}"


def merge_id(consolidation_id: int) -> str:
    """The delivery id of a consolidation's merge job: one per proposal, ever."""
    return f"merge:{consolidation_id}"


def queue_merge(session: Session, consolidation_id: int) -> bool:
    """Queue the model's merged text for a proposal, in the caller's transaction; False if queued
    before. In the proposal's own transaction, so no proposal is left without its job."""
    return inbox.accept(
        session,
        source=SOURCE,
        event=MERGE,
        delivery_id=merge_id(consolidation_id),
        payload=json.dumps({"consolidation": consolidation_id}),
        ticket_key=None,
    )


def _queue(services: Services, event: str, delivery_id: str, payload: dict[str, object]) -> bool:
    with db.transaction(services.engine) as session:
        new = inbox.accept(
            session,
            source=SOURCE,
            event=event,
            delivery_id=delivery_id,
            payload=json.dumps(payload),
            ticket_key=str(payload.get("pr") or "") or None,
        )
    if new:
        log.info("queued %s for %s", event, payload.get("pr"))
    return new


def queue_rating(services: Services, pr_key: str) -> bool:
    """Queue the rating of what was shown for a closed PR's tickets; False if queued before."""
    if not services.settings.model_enabled:
        return False
    return _queue(services, RATE, rate_id(pr_key), {"pr": pr_key})


def queue_backfill(services: Services, since: timedelta, dry_run: bool) -> backfill.Queued:
    """Queue a rating job for each PR closed in the last ``since`` with lessons to rate.

    At most `backfill.MAX_PULLS`, newest first (``more`` says some wait for the next run); a
    dead job is queued again, anything else already queued is left alone. Needs a model:
    callers check `Settings.model_enabled`, since a job without one would only be ignored.
    """
    limit = backfill.MAX_PULLS
    with db.transaction(services.engine) as session:
        found = backfill.candidates(session, clock.now() - since, limit=limit + 1)
    result = backfill.Queued(found[:limit], more=len(found) > limit, dry_run=dry_run)
    for pull in [] if dry_run else result.found:
        # A dead job runs again from a clean slate; any other is inserted if absent, so a
        # job that a PR closing meanwhile queued is not queued twice.
        put = inbox.enqueue if pull.dead else inbox.accept
        payload = json.dumps({"pr": pull.key})
        with db.transaction(services.engine) as session:
            new = put(
                session,
                source=SOURCE,
                event=RATE,
                delivery_id=rate_id(pull.key),
                payload=payload,
                ticket_key=pull.key,
            )
        if new:
            result.queued.append(pull.key)
    return result


def queue_reflection(
    services: Services, seen: PullRequestState, ticket: str, scope: str, opener: str | None
) -> bool:
    """Queue one reflection call on a closed PR's review feedback; False if queued before."""
    payload = {"pr": seen.key, "ticket": ticket, "scope": scope, "opener": opener}
    return _queue(services, REFLECT, reflect_id(seen.key), payload)


def ask(
    services: Services,
    purpose: str,
    messages: list[dict[str, str]],
    schema: type[T],
    *,
    max_tokens: int,
) -> Answer[T]:
    """One question to the model within today's budget; a failure says how the job ends.

    Over budget: deferred to the next UTC day (no attempt counted). 429: deferred until its
    Retry-After. Timeout or down: Transient, retried with backoff. Anything else (a refused
    key, an unknown model, nonsense twice): PermanentError, dead with the reason, for
    `deliveries replay` once fixed. Every request made counts against the budget and metrics.
    """
    settings = services.settings
    if not settings.model_enabled:
        raise Ignored("no model endpoint is set (PLAYBOOK_MODEL_BASE_URL and PLAYBOOK_MODEL)")
    within_budget(services)
    client = model_client.make_client(
        settings.model_base_url or "", settings.model_key, settings.model_timeout_seconds
    )
    try:
        answer = model_client.ask_json(
            client, settings.model_name or "", messages, schema, max_tokens=max_tokens
        )
    except ModelError as error:
        count(services, error.usage, failed=True)
        metrics.model_call(purpose, error)
        raise ending(error) from None
    count(services, answer.usage, failed=False)
    metrics.model_call(purpose, answer)
    return answer


def within_budget(services: Services) -> None:
    """Deferred to the next UTC day when today's calls or tokens are spent (every model job)."""
    settings = services.settings
    now = clock.now()
    with db.transaction(services.engine) as session:
        spent = model_usage.over_budget(
            session,
            now,
            daily_calls=settings.model_daily_calls,
            daily_tokens=settings.model_daily_tokens,
        )
    if spent:
        raise Deferred(f"{spent}; waiting for the next UTC day", model_usage.next_day(now))


def count(services: Services, usage: Usage, *, failed: bool) -> None:
    """Add what a request cost to today's usage, shared by every worker's budget."""
    with db.transaction(services.engine) as session:
        model_usage.add(
            session,
            model_usage.day_of(clock.now()),
            calls=usage.calls,
            tokens=usage.total_tokens,
            failures=1 if failed else 0,
        )


def ending(
    error: ModelError, *, endpoint: str = "model endpoint", fixes: dict[str, str] | None = None
) -> Exception:
    """How a failed model call ends the job's attempt (see `ask`); ``fixes`` name the setting
    to change for each failure no retry cures."""
    said = f"{endpoint}: {error}"
    if error.reason == "rate_limited":
        wait = (
            timedelta(seconds=error.retry_after)
            if error.retry_after is not None
            else RATE_LIMIT_WAIT
        )
        return Deferred(said, clock.now() + max(wait, timedelta(seconds=1)))
    if error.transient:
        return Transient(said)
    fix = (_FIXES if fixes is None else fixes).get(error.reason, "fix it")
    return PermanentError(f"{said}; {fix}, then `playbook-bot deliveries replay` this job")


# The setting to change for each failure no retry can cure, as the dead job's reason says it.
_FIXES = {
    "auth": "check PLAYBOOK_MODEL_API_KEY",
    "not_found": "set PLAYBOOK_MODEL to a model the endpoint serves",
    "bad_answer": "set PLAYBOOK_MODEL to a model that follows JSON mode",
    "bad_request": "check PLAYBOOK_MODEL_BASE_URL and PLAYBOOK_MODEL",
}

"""Usage events: recording loads and cites, settling cite outcomes, keeping counters true."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import case, func, select, update
from sqlalchemy.orm import Session

from playbook import clock
from playbook.errors import BulletNotFound, InvalidInput
from playbook.lessons import fields, replacements
from playbook.models import EVENT_KINDS, Bullet, UsageEvent
from playbook.outcomes import self_reports


def _later(column: object, ts: datetime) -> object:
    # Events can arrive out of order (imports, retries): keep the latest time, not the last write.
    return case((column.is_(None), ts), (column < ts, ts), else_=column)  # type: ignore[attr-defined]


def record(
    session: Session,
    kind: str,
    bullet_ids: Sequence[str],
    *,
    ticket_key: str | None = None,
    phase: str | None = None,
    consumer: str | None = None,
    success: bool | None = None,
    ranks: Sequence[int | None] | None = None,
    query_id: str | None = None,
    ts: datetime | None = None,
    dedup_keys: Sequence[str | None] | None = None,
    pr_key: str | None = None,
    source: str | None = None,
) -> list[UsageEvent]:
    """Append one event per bullet id and update that bullet's counters in the same transaction.

    Unknown ids reject the whole call, so a typo never records half a list. With
    ``dedup_keys``, an event whose key was recorded before is skipped (imports). With
    ``source`` (who reported it), the events are self-reports and weigh what
    `self_reports` allows them; without, they are the bot's own observations.
    """
    if kind not in EVENT_KINDS:
        raise InvalidInput(f"event must be one of {', '.join(EVENT_KINDS)}, not {kind!r}")
    ids = [bullet_id.strip() for bullet_id in bullet_ids if bullet_id and bullet_id.strip()]
    if not ids:
        raise InvalidInput("name at least one bullet id")
    known = set(session.scalars(select(Bullet.id).where(Bullet.id.in_(ids))))
    for bullet_id in ids:
        if bullet_id not in known:
            raise BulletNotFound(bullet_id)
    when = clock.to_utc(ts) if ts is not None else clock.now()
    weigher = self_reports.Weigher(session, source, [ticket_key]) if source else None
    if weigher is not None:
        # A reported time from the future would keep the lesson fresh and unpruned forever.
        when = min(when, clock.now())
    keys = list(dedup_keys) if dedup_keys is not None else [None] * len(ids)
    seen: dict[str, tuple[int, bool | None]] = (
        {
            key: (event_id, outcome)
            for event_id, key, outcome in session.execute(
                select(UsageEvent.id, UsageEvent.dedup_key, UsageEvent.success).where(
                    UsageEvent.dedup_key.in_([k for k in keys if k])
                )
            )
        }
        if any(keys)
        else {}
    )
    events = []
    for position, bullet_id in enumerate(ids):
        key = keys[position]
        if key is not None and key in seen:
            # Recorded before: the same evidence again adds nothing, but a cite whose
            # outcome was unknown takes the outcome this report brings.
            event_id, outcome = seen[key]
            if kind == "cited" and success is not None and event_id:
                if weigher is not None:
                    _report_again(session, weigher, event_id, success)
                elif outcome is not success:
                    settle(session, [event_id], success)
            continue
        if key is not None:
            seen[key] = (0, success)  # a list naming one id twice records it once
        rank = ranks[position] if ranks is not None else None
        weight = (
            weigher.weigh(kind, bullet_id, ticket_key, success if kind == "cited" else None)
            if weigher is not None
            else self_reports.Weight(counted=True, success=success)
        )
        event = UsageEvent(
            kind=kind,
            bullet_id=bullet_id,
            ticket_key=ticket_key,
            phase=phase,
            consumer=consumer,
            success=weight.success if kind == "cited" else None,
            rank=rank,
            query_id=query_id,
            ts=when,
            dedup_key=key,
            pr_key=pr_key,
            source=source,
            counted=weight.counted,
            claimed_success=weight.claimed,
            discount=weight.discount,
        )
        session.add(event)
        events.append(event)
        _count(session, event)
    session.flush()
    return events


def _report_again(
    session: Session, weigher: self_reports.Weigher, event_id: int, claim: bool
) -> None:
    # A self-report never changes another source's event, least of all a PR's observed cite.
    event = session.get(UsageEvent, event_id)
    if event is None or not weigher.may_change(event):
        return
    weight = weigher.weigh_again(event, claim)
    if weight.success is not None:
        settle(session, [event_id], weight.success)
    elif weight.claimed is not None:
        event.claimed_success, event.discount = weight.claimed, weight.discount


def _count(session: Session, event: UsageEvent) -> None:
    # Counters move with a single UPDATE ... SET n = n + 1, atomic on SQLite and PostgreSQL,
    # so concurrent recorders never lose an increment.
    if not event.counted:
        return  # recorded for reporting only (self_reports)
    if event.kind == "loaded":
        values = {
            "loads": Bullet.loads + 1,
            "last_loaded_at": _later(Bullet.last_loaded_at, event.ts),
        }
    else:
        values = {
            "cites": Bullet.cites + 1,
            "cites_success": Bullet.cites_success + (1 if event.success is True else 0),
            "cites_failure": Bullet.cites_failure + (1 if event.success is False else 0),
            "last_cited_at": _later(Bullet.last_cited_at, event.ts),
        }
    session.execute(update(Bullet).where(Bullet.id == event.bullet_id).values(**values))


def settle(session: Session, event_ids: Iterable[int], success: bool | None) -> int:
    """Set the outcome of cite events (e.g. when their PR merges or closes); count the changed.

    Settling again with the same outcome changes nothing; a different outcome moves the
    counters from one side to the other, so a reopened-then-merged PR ends up counted once.
    """
    changed = 0
    events = session.scalars(
        select(UsageEvent).where(
            UsageEvent.id.in_(list(event_ids)), UsageEvent.kind == "cited", UsageEvent.counted
        )
    )
    for event in events:
        if event.success is success:
            continue
        delta_success = (1 if success is True else 0) - (1 if event.success is True else 0)
        delta_failure = (1 if success is False else 0) - (1 if event.success is False else 0)
        event.success = success
        session.execute(
            update(Bullet)
            .where(Bullet.id == event.bullet_id)
            .values(
                cites_success=Bullet.cites_success + delta_success,
                cites_failure=Bullet.cites_failure + delta_failure,
            )
        )
        changed += 1
    session.flush()
    return changed


def events_for(session: Session, bullet_id: str, limit: int | None = None) -> list[UsageEvent]:
    """A bullet's usage events, newest first."""
    query = (
        select(UsageEvent)
        .where(UsageEvent.bullet_id == bullet_id)
        .order_by(UsageEvent.ts.desc(), UsageEvent.id.desc())
    )
    if limit is not None:
        query = query.limit(limit)
    return list(session.scalars(query))


def derived_counters(session: Session) -> dict[str, dict[str, object]]:
    """Each bullet's counters computed from the event log alone."""
    loaded = UsageEvent.kind == "loaded"
    cited = UsageEvent.kind == "cited"
    # Only counted events: a report that moves nothing must not come back in a recount.
    rows = session.execute(
        select(
            UsageEvent.bullet_id,
            func.count().filter(loaded),
            func.count().filter(cited),
            func.count().filter(cited, UsageEvent.success.is_(True)),
            func.count().filter(cited, UsageEvent.success.is_(False)),
            func.max(case((loaded, UsageEvent.ts))),
            func.max(case((cited, UsageEvent.ts))),
        )
        .where(UsageEvent.counted)
        .group_by(UsageEvent.bullet_id)
    )
    return {
        row[0]: {
            "loads": row[1],
            "cites": row[2],
            "cites_success": row[3],
            "cites_failure": row[4],
            "last_loaded_at": clock.parse_time(row[5]) if row[5] is not None else None,
            "last_cited_at": clock.parse_time(row[6]) if row[6] is not None else None,
        }
        for row in rows
    }


COUNTER_FIELDS = (
    "loads",
    "cites",
    "cites_success",
    "cites_failure",
    "last_loaded_at",
    "last_cited_at",
)


def recount(session: Session) -> list[str]:
    """Make every bullet's counters match its event log; returns the ids that had drifted."""
    derived = derived_counters(session)
    empty = dict.fromkeys(COUNTER_FIELDS[:4], 0) | {"last_loaded_at": None, "last_cited_at": None}
    fixed = []
    for bullet in session.scalars(select(Bullet)):
        expected = derived.get(bullet.id, empty)
        if any(getattr(bullet, field) != expected[field] for field in COUNTER_FIELDS):
            for field in COUNTER_FIELDS:
                setattr(bullet, field, expected[field])
            fixed.append(bullet.id)
    session.flush()
    return fixed


@dataclass(frozen=True)
class AgentEvent:
    """One event in the shape agents write to `.lesson-usage.jsonl` and POST to the API."""

    kind: str
    bullet_ids: tuple[str, ...]
    ticket_key: str | None = None
    phase: str | None = None
    consumer: str | None = None
    success: bool | None = None
    ts: datetime | None = None
    rank: int | None = None
    query_id: str | None = None


# Every load and cite is about work on a ticket: it is what makes a lesson count once per
# ticket, and what a cite is matched with a load by in the cite rate.
MISSING_TICKET = "ticketId is required: name the ticket the work was for, e.g. CTMS-4410"
# Ranks are positions in a list of lessons; anything beyond this is not a rank.
MAX_RANK = 10_000
# Lesson ids one event may name (after repeats are dropped).
MAX_IDS_PER_EVENT = 200


def _optional_text(data: dict[str, Any], max_chars: int, *names: str) -> str | None:
    for name in names:
        value = data.get(name)
        if value is not None:
            if isinstance(value, bool) or not isinstance(value, str | int):
                raise InvalidInput(f"{name} must be a string")
            return fields.bounded(str(value).strip(), name, max_chars) or None
    return None


def parse_agent_event(data: Any) -> AgentEvent:
    """Read one agent event: ``{"event", "lessonIds", "ticketId", "phase", "consumer",
    "phaseSuccess", "ts"}`` (also ``lessonId``, ``rank``, ``queryId``); raises InvalidInput.
    """
    if not isinstance(data, dict):
        raise InvalidInput("an event must be a JSON object")
    kind = data.get("event")
    if kind not in EVENT_KINDS:
        raise InvalidInput(f"event must be one of {', '.join(EVENT_KINDS)}, not {kind!r}")
    ids = data.get("lessonIds", data.get("lessonId"))
    if isinstance(ids, str):
        ids = [ids]
    if (
        not isinstance(ids, list)
        or not ids
        or not all(isinstance(i, str) and i.strip() for i in ids)
    ):
        raise InvalidInput("lessonIds must be a non-empty list of bullet ids")
    # A list naming pb-1 5,000 times is one mention of pb-1.
    unique = list(
        dict.fromkeys(fields.bounded(i.strip(), "lessonIds", fields.BULLET_ID_CHARS) for i in ids)
    )
    if len(unique) > MAX_IDS_PER_EVENT:
        raise InvalidInput(f"lessonIds names more than {MAX_IDS_PER_EVENT} lessons")
    success = data.get("phaseSuccess", data.get("success"))
    if success is not None and not isinstance(success, bool):
        raise InvalidInput("phaseSuccess must be true, false or absent")
    rank = data.get("rank")
    if isinstance(rank, float) and rank.is_integer():
        rank = int(rank)  # JSON does not tell 3 from 3.0, and JSON Schema calls both integers
    if rank is not None and (
        isinstance(rank, bool) or not isinstance(rank, int) or not 0 <= rank <= MAX_RANK
    ):
        raise InvalidInput(f"rank must be an integer from 0 to {MAX_RANK}")
    ts = None
    if data.get("ts") is not None:
        try:
            ts = clock.parse_time(data["ts"])
        except (ValueError, TypeError, OverflowError, OSError):
            raise InvalidInput(f"ts {data['ts']!r} is not an ISO 8601 time or epoch") from None
    ticket_key = _optional_text(data, fields.TICKET_KEY_CHARS, "ticketId", "ticket")
    if ticket_key is None:
        raise InvalidInput(MISSING_TICKET)
    return AgentEvent(
        kind=kind,
        bullet_ids=tuple(unique),
        ticket_key=ticket_key,
        phase=_optional_text(data, fields.PHASE_CHARS, "phase"),
        consumer=_optional_text(data, fields.CONSUMER_CHARS, "consumer"),
        success=success if kind == "cited" else None,
        ts=ts,
        rank=rank,
        query_id=_optional_text(data, fields.QUERY_ID_CHARS, "queryId", "query_id"),
    )


def _digest(text: str) -> str:
    # Dedup keys are stored in 64 characters whatever the caller's key looks like.
    return hashlib.sha256(text.encode()).hexdigest()


def once_key(kind: str, subject: str, bullet_id: str) -> str:
    """The dedup key that makes a load or cite count once per ticket (or PR) and lesson."""
    return _digest(f"{'shown' if kind == 'loaded' else 'cite'}:{subject}:{bullet_id}")


def record_once(
    session: Session,
    kind: str,
    bullet_ids: Sequence[str],
    *,
    ticket_key: str,
    phase: str | None = None,
    consumer: str | None = None,
    success: bool | None = None,
    ranks: Sequence[int | None] | None = None,
    query_id: str | None = None,
    ts: datetime | None = None,
    source: str | None = None,
    credit_replacement: bool = False,
) -> list[UsageEvent]:
    """Record loads or cites for work on a ticket, each (ticket, lesson, kind) once.

    Reporting a lesson again for the same ticket adds nothing; a repeated cite that brings
    an outcome (``success``) settles the one already recorded. Returns the new events.
    ``source`` names who reported them: see `record`. With ``credit_replacement``, a cite
    of a superseded lesson also cites its replacement (`with_replacements`).
    """
    ticket = fields.bounded((ticket_key or "").strip(), "ticketId", fields.TICKET_KEY_CHARS)
    if not ticket:
        raise InvalidInput(MISSING_TICKET)
    ids = [bullet_id.strip() for bullet_id in bullet_ids if bullet_id and bullet_id.strip()]
    if credit_replacement and kind == "cited":
        named = len(ids)
        ids = with_replacements(session, ids, ts)
        if ranks is not None:
            ranks = [*ranks, *[None] * (len(ids) - named)]
    return record(
        session,
        kind,
        ids,
        ticket_key=ticket,
        phase=phase,
        consumer=consumer,
        success=success,
        ranks=ranks,
        query_id=query_id,
        ts=ts,
        dedup_keys=[once_key(kind, ticket, bullet_id) for bullet_id in ids],
        source=source,
    )


def record_agent_event(
    session: Session,
    event: AgentEvent,
    dedup_key: str | None = None,
    *,
    source: str | None = "agent",
    credit_replacement: bool = False,
) -> list[UsageEvent]:
    """Record a parsed agent event (one usage event per bullet id), once per ticket.

    Each (ticket, lesson, kind) counts once however often an agent reports it, by API,
    by import or both, and weighs what `self_reports` allows a report from ``source``
    (None only for a restore by the operator, which counts as written).
    ``dedup_key`` is accepted for older callers and not needed: an event without a
    ticket is refused, so the ticket is always the key. ``credit_replacement``: see
    `record_once`.
    """
    del dedup_key  # the ticket is the key; see the docstring
    return record_once(
        session,
        event.kind,
        event.bullet_ids,
        ticket_key=event.ticket_key or "",
        phase=event.phase,
        consumer=event.consumer,
        success=event.success,
        ranks=[event.rank] * len(event.bullet_ids) if event.rank is not None else None,
        query_id=event.query_id,
        ts=event.ts,
        source=source,
        credit_replacement=credit_replacement,
    )


def with_replacements(
    session: Session, bullet_ids: Sequence[str], at: datetime | None = None
) -> list[str]:
    """``bullet_ids`` and, after them, the live replacement of each one superseded by ``at``.

    For PLAYBOOK_SUPERSEDED_CITES_COUNT_FOR_REPLACEMENT: a cite of an old lesson stays on it,
    and counts for the lesson that replaced it too. A replacement named already, or by two
    old lessons, is added once, so the cite counts once for it (each is once per ticket or
    PR). Unknown ids are left for `record` to refuse.
    """
    ids = list(bullet_ids)
    found = replacements.live_replacements(session, ids, at)
    extra = dict.fromkeys(found[i] for i in ids if i in found and found[i] not in ids)
    return [*ids, *extra]


@dataclass
class Tally:
    """What a call's reports weighed: new events, those counted as use and as ratings."""

    recorded: int = 0
    counted: int = 0
    rated: int = 0
    discounted: dict[str, int] | None = None

    def add(self, events: Iterable[UsageEvent]) -> None:
        """Count ``events`` (new ones, as `record` returns them) in."""
        for event in events:
            self.recorded += 1
            self.counted += 1 if event.counted else 0
            self.rated += 1 if event.success is not None else 0
            if event.discount:
                self.discounted = self.discounted or {}
                self.discounted[event.discount] = self.discounted.get(event.discount, 0) + 1

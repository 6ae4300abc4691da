"""`.lesson-usage.jsonl` usage logs: the usage events written out, and read back in."""

from __future__ import annotations

import hashlib
import io as stdio
import json
from collections.abc import Callable, Iterable
from typing import IO, Any

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from playbook import clock
from playbook.errors import InvalidInput, PlaybookError
from playbook.models import Bullet, UsageEvent
from playbook.outcomes import usage
from playbook.transfer.export import EXPORT_CHUNK, iso
from playbook.transfer.formats import BrokenFile, Entry, Unreadable, json_entries
from playbook.transfer.reports import BATCH_SIZE, ImportReport, Problems, Progress, commit


def write_usage(session: Session, out: IO[str]) -> int:
    """Write the usage log to ``out`` as `.lesson-usage.jsonl`, oldest first; the count."""
    query = select(UsageEvent).order_by(UsageEvent.ts, UsageEvent.id)
    count = 0
    for event in session.scalars(query.execution_options(yield_per=EXPORT_CHUNK)):
        record: dict[str, Any] = {
            "event": event.kind,
            "lessonIds": [event.bullet_id],
            "ticketId": event.ticket_key,
            "phase": event.phase,
            "consumer": event.consumer,
            "phaseSuccess": event.success,
            "rank": event.rank,
            "queryId": event.query_id,
            "ts": iso(event.ts),
        }
        out.write(json.dumps({k: v for k, v in record.items() if v is not None}) + "\n")
        count += 1
        if count % EXPORT_CHUNK == 0:
            # Events are ORM objects here; let each chunk go once it is written.
            session.expunge_all()
    return count


def export_usage(session: Session) -> str:
    """The usage log as `.lesson-usage.jsonl` text, one event per line, oldest first."""
    out = stdio.StringIO()
    write_usage(session, out)
    return out.getvalue()


def _usage_event(entry: Entry) -> usage.AgentEvent:
    if isinstance(entry.data, Unreadable):
        raise InvalidInput(entry.data.message)
    event = usage.parse_agent_event(entry.data)
    if event.ts is None:
        event = usage.AgentEvent(**{**event.__dict__, "ts": clock.now()})
    return event


def _line_key(entry: Entry) -> str:
    # The same line means the same event, whichever file it is imported from.
    return hashlib.sha256(json.dumps(entry.data, sort_keys=True).encode()).hexdigest()


def _check_usage(session: Session, entries: Iterable[Entry], source: str) -> int:
    problems = Problems()
    count = 0
    waiting: dict[str, int] = {}  # bullet id -> first line naming it, checked a batch at a time

    def check_waiting() -> None:
        ids = list(waiting)
        known = set(session.scalars(select(Bullet.id).where(Bullet.id.in_(ids))))
        for bullet_id in ids:
            if bullet_id not in known:
                problems.add(
                    waiting[bullet_id], f"lessonIds: no bullet {bullet_id} in this playbook"
                )
        waiting.clear()

    try:
        for entry in entries:
            count += 1
            try:
                event = _usage_event(entry)
            except PlaybookError as problem:
                problems.add(entry.line, str(problem))
                continue
            for bullet_id in event.bullet_ids:
                waiting.setdefault(bullet_id, entry.line)
            if len(waiting) >= 500:
                check_waiting()
    except BrokenFile as fatal:
        problems.add(fatal.line, fatal.message)
    if waiting:
        check_waiting()
    problems.refuse_if_any(source)
    return count


def import_usage(
    session: Session,
    opener: Callable[[], IO[bytes]],
    *,
    source_name: str,
    batch_size: int = BATCH_SIZE,
    progress: Progress | None = None,
) -> ImportReport:
    """Append the events of a usage log; a line imported before is not added again.

    Like bullets: the whole log is checked first (every line parses, names a ticket and
    known lessons) and nothing is written if one is bad; then batches are committed.
    """
    with opener() as stream:
        total = _check_usage(session, json_entries(stream), source_name)
    report = ImportReport()
    done = 0
    batch: list[Entry] = []
    with opener() as stream:
        for entry in json_entries(stream):
            batch.append(entry)
            if len(batch) >= batch_size:
                done += _write_usage_batch(session, batch, report)
                batch = []
                if progress is not None:
                    progress(done, total)
    done += _write_usage_batch(session, batch, report)
    if progress is not None:
        progress(done, total)
    return report


def _write_usage_batch(session: Session, batch: list[Entry], report: ImportReport) -> int:
    if not batch:
        return 0
    # Another process (an agent reporting through the API) may record one of these
    # (ticket, lesson, kind) events between our check and our insert; the unique key then
    # refuses ours. One savepoint per batch, and one retry, which finds theirs and skips it.
    for attempt in (1, 2):
        added = duplicate = 0
        try:
            with session.begin_nested():
                for entry in batch:
                    event = _usage_event(entry)
                    # Restoring a log is the operator's act (it holds the database URL and
                    # could write any row): its events count as written, not as self-reports.
                    recorded = usage.record_agent_event(
                        session, event, _line_key(entry), source=None
                    )
                    added += len(recorded)
                    duplicate += len(event.bullet_ids) - len(recorded)
        except IntegrityError:
            if attempt == 2:
                raise
            continue
        break
    commit(session)
    report.events_added += added
    report.events_duplicate += duplicate
    return len(batch)

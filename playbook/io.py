"""Import and export: YAML/JSONL/CSV playbooks and `.lesson-usage.jsonl` usage logs."""

from __future__ import annotations

import csv
import hashlib
import io as stdio
import json
from collections.abc import Collection, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

import yaml
from sqlalchemy import select
from sqlalchemy.orm import Session

from playbook import clock, lifecycle, usage
from playbook.errors import InvalidInput, PlaybookError
from playbook.models import Bullet, UsageEvent

Format = Literal["yaml", "jsonl", "csv"]
# The order teams' YAML files use, then this project's fields.
EXPORT_FIELDS = (
    "id",
    "text",
    "tags",
    "learned_from",
    "deprecated",
    "demoted_on",
    "demoted_reason",
    "section",
    "scope",
    "status",
    "source",
    "source_url",
    "created_at",
    "updated_at",
)


@dataclass
class ImportReport:
    """What an import did, and the entries it had to skip (position, sentence)."""

    created: int = 0
    updated: int = 0
    unchanged: int = 0
    events_added: int = 0
    events_duplicate: int = 0
    errors: list[tuple[int, str]] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True when nothing was skipped."""
        return not self.errors

    def summary(self) -> str:
        """One line for people."""
        parts = []
        if (
            self.created
            or self.updated
            or self.unchanged
            or not (self.events_added or self.events_duplicate)
        ):
            parts.append(
                f"{self.created} bullets created, {self.updated} updated, "
                f"{self.unchanged} unchanged"
            )
        if self.events_added or self.events_duplicate:
            parts.append(
                f"{self.events_added} usage events added, {self.events_duplicate} already imported"
            )
        if self.errors:
            parts.append(f"{len(self.errors)} skipped")
        return "; ".join(parts)


def _iso(value: datetime | None) -> str | None:
    return clock.to_utc(value).isoformat() if value else None


def bullet_record(bullet: Bullet) -> dict[str, Any]:
    """A bullet's exportable fields (counters are derived from the usage log, not exported)."""
    return {
        "id": bullet.id,
        "text": bullet.text,
        "tags": list(bullet.tags or []),
        "learned_from": bullet.learned_from,
        "deprecated": bullet.status == "deprecated",
        "demoted_on": _iso(bullet.demoted_on),
        "demoted_reason": bullet.demoted_reason,
        "section": bullet.section,
        "scope": bullet.scope,
        "status": bullet.status,
        "source": bullet.source,
        "source_url": bullet.source_url,
        "created_at": _iso(bullet.created_at),
        "updated_at": _iso(bullet.updated_at),
    }


def export_bullets(session: Session, fmt: Format, statuses: Collection[str] | None = None) -> str:
    """Every bullet (or those in ``statuses``) as YAML, JSON lines or CSV."""
    query = select(Bullet)
    if statuses is not None:
        query = query.where(Bullet.status.in_(list(statuses)))
    records = [bullet_record(b) for b in session.scalars(query)]
    records.sort(key=lambda record: lifecycle.sort_key(record["id"]))
    if fmt == "yaml":
        return yaml.safe_dump(records, sort_keys=False, allow_unicode=True, width=100)
    if fmt == "jsonl":
        return "".join(json.dumps(record, ensure_ascii=False) + "\n" for record in records)
    if fmt == "csv":
        out = stdio.StringIO()
        writer = csv.DictWriter(out, fieldnames=EXPORT_FIELDS, lineterminator="\n")
        writer.writeheader()
        for record in records:
            writer.writerow(
                record
                | {
                    "tags": ",".join(record["tags"]),
                    "deprecated": "true" if record["deprecated"] else "false",
                }
            )
        return out.getvalue()
    raise InvalidInput(f"unknown format {fmt!r}; use yaml, jsonl or csv")


def _bullet_values(entry: Any) -> dict[str, Any]:
    """Normalise one imported entry; raises InvalidInput with a sentence."""
    if not isinstance(entry, dict):
        raise InvalidInput("a bullet must be a mapping of fields")
    values: dict[str, Any] = {}
    for key in ("id", "text", "section", "scope", "learned_from", "source", "source_url"):
        value = entry.get(key)
        if value not in (None, ""):
            values[key] = str(value).strip()
    if not values.get("text"):
        raise InvalidInput("the bullet has no text")
    if "tags" in entry and entry["tags"] not in (None, ""):
        tags = entry["tags"]
        values["tags"] = lifecycle.normalize_tags(tags if isinstance(tags, list | str) else [tags])
    deprecated = entry.get("deprecated")
    if isinstance(deprecated, str):
        deprecated = deprecated.strip().lower() in ("true", "yes", "1")
    if entry.get("status") not in (None, ""):
        values["status"] = str(entry["status"]).strip()
    elif deprecated is not None:
        values["status"] = "deprecated" if deprecated else "active"
    for key in ("demoted_on", "created_at", "updated_at"):
        raw = entry.get(key)
        if raw not in (None, ""):
            try:
                values[key] = clock.parse_time(raw)
            except (ValueError, TypeError, OverflowError, OSError):
                raise InvalidInput(f"{key} {raw!r} is not a date") from None
    if "demoted_reason" in entry:
        values["demoted_reason"] = entry.get("demoted_reason") or None
    if "demoted_on" in entry and entry.get("demoted_on") in (None, ""):
        values["demoted_on"] = None
    return values


def _entries(text: str, fmt: Format) -> Iterator[tuple[int, Any]]:
    """(position, raw entry): 1-based index for YAML, line number for JSONL and CSV."""
    if fmt == "yaml":
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as error:
            mark = getattr(error, "problem_mark", None)
            where = f" at line {mark.line + 1}" if mark is not None else ""
            raise InvalidInput(f"the file is not valid YAML{where}") from None
        if isinstance(data, dict) and isinstance(data.get("bullets"), list):
            data = data["bullets"]
        if data is None:
            return
        if not isinstance(data, list):
            raise InvalidInput(
                "a YAML playbook is a list of bullets (or a mapping with `bullets:`)"
            )
        yield from enumerate(data, start=1)
    elif fmt == "jsonl":
        for number, line in enumerate(text.splitlines(), start=1):
            if line.strip():
                try:
                    yield number, json.loads(line)
                except json.JSONDecodeError as error:
                    yield number, InvalidInput(f"not JSON ({error.msg})")
    else:
        try:
            reader = csv.DictReader(stdio.StringIO(text))
            if not reader.fieldnames or "text" not in reader.fieldnames:
                raise InvalidInput("a CSV playbook needs a header row with at least `text`")
            for row in reader:
                yield reader.line_num, row
        except csv.Error as error:
            raise InvalidInput(f"the file is not valid CSV ({error})") from None


def import_bullets(
    session: Session, text: str, fmt: Format, *, actor: str, source_name: str
) -> ImportReport:
    """Create or update bullets from a file's text; the same file again changes nothing."""
    report = ImportReport()
    reason = f"import from {source_name}"
    for position, entry in _entries(text, fmt):
        try:
            if isinstance(entry, InvalidInput):
                raise entry
            values = _bullet_values(entry)
            with session.begin_nested():
                if values.get("id"):
                    existed = session.get(Bullet, values["id"]) is not None
                    change = lifecycle.put(session, values, actor=actor, reason=reason)
                    if not change.changed:
                        report.unchanged += 1
                    elif existed:
                        report.updated += 1
                    else:
                        report.created += 1
                    continue
                scope = values.get("scope", "global")
                same = session.scalar(
                    select(Bullet.id).where(Bullet.scope == scope, Bullet.text == values["text"])
                )
                if same is not None:
                    report.unchanged += 1
                    continue
                result = lifecycle.add(
                    session,
                    values["text"],
                    learned_from=values.get("learned_from"),
                    actor=actor,
                    tags=values.get("tags"),
                    scope=scope,
                    section=values.get("section", "best_practice"),
                    status=values.get("status", "active")
                    if values.get("status") in ("proposed", "active")
                    else "active",
                    source=values.get("source", "import"),
                    source_url=values.get("source_url"),
                    reason=reason,
                )
                if result.created:
                    report.created += 1
                else:
                    report.unchanged += 1
        except PlaybookError as problem:
            report.errors.append((position, str(problem)))
    return report


def export_usage(session: Session) -> str:
    """The usage log as `.lesson-usage.jsonl`, one event per line, oldest first."""
    lines = []
    for event in session.scalars(select(UsageEvent).order_by(UsageEvent.ts, UsageEvent.id)):
        record: dict[str, Any] = {
            "event": event.kind,
            "lessonIds": [event.bullet_id],
            "ticketId": event.ticket_key,
            "phase": event.phase,
            "consumer": event.consumer,
            "phaseSuccess": event.success,
            "rank": event.rank,
            "queryId": event.query_id,
            "ts": _iso(event.ts),
        }
        lines.append(json.dumps({k: v for k, v in record.items() if v is not None}) + "\n")
    return "".join(lines)


def import_usage(session: Session, text: str, *, source_name: str) -> ImportReport:
    """Append the events of a usage log; a line imported before is not added again."""
    report = ImportReport()
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            try:
                data = json.loads(line)
            except json.JSONDecodeError as error:
                raise InvalidInput(f"not JSON ({error.msg})") from None
            event = usage.parse_agent_event(data)
            if event.ts is None:
                event = usage.AgentEvent(**{**event.__dict__, "ts": clock.now()})
            # The same line means the same event, whichever file it is imported from.
            key = hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()
            with session.begin_nested():
                added = usage.record_agent_event(session, event, key)
            report.events_added += len(added)
            report.events_duplicate += len(event.bullet_ids) - len(added)
        except PlaybookError as problem:
            report.errors.append((number, str(problem)))
    return report


def _looks_like_usage(text: str) -> bool:
    first = next((line for line in text.splitlines() if line.strip()), "")
    try:
        data = json.loads(first)
    except json.JSONDecodeError:
        return False
    return isinstance(data, dict) and ("event" in data or "lessonIds" in data)


def import_file(session: Session, path: Path, *, actor: str) -> ImportReport:
    """Import bullets (.yaml/.yml, .jsonl, .csv) or a usage log (.jsonl with events)."""
    suffix = path.suffix.lower()
    if suffix not in (".yaml", ".yml", ".jsonl", ".ndjson", ".json", ".csv"):
        raise InvalidInput(
            f"{path} has an unknown extension; use .yaml, .jsonl, .csv or a .lesson-usage.jsonl"
        )
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InvalidInput(f"{path} does not exist") from None
    except UnicodeDecodeError:
        raise InvalidInput(f"{path} is not UTF-8 text") from None
    except OSError as error:
        raise InvalidInput(f"cannot read {path} ({error.strerror})") from None
    if suffix in (".yaml", ".yml"):
        return import_bullets(session, text, "yaml", actor=actor, source_name=path.name)
    if suffix == ".csv":
        return import_bullets(session, text, "csv", actor=actor, source_name=path.name)
    if _looks_like_usage(text):
        return import_usage(session, text, source_name=path.name)
    return import_bullets(session, text, "jsonl", actor=actor, source_name=path.name)

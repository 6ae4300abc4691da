"""Exporting the playbook's bullets as YAML, JSON lines or CSV, streamed as they are read."""

from __future__ import annotations

import csv
import io as stdio
import json
from collections.abc import Collection, Iterator
from datetime import datetime
from typing import IO, Any

import yaml
from sqlalchemy import select
from sqlalchemy.orm import Session

from playbook import clock
from playbook.errors import InvalidInput
from playbook.models import Bullet
from playbook.transfer.formats import Format

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
    "superseded_by",
    "source",
    "source_url",
    "paths",
    "symbols",
    "created_at",
    "updated_at",
)
# Rows fetched per round trip while exporting.
EXPORT_CHUNK = 1000
# libyaml's emitter when there is one, as files are read with libyaml's parser.
_YamlDumper: Any = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


def iso(value: datetime | None) -> str | None:
    return clock.to_utc(value).isoformat() if value else None


def bullet_record(bullet: Any) -> dict[str, Any]:
    """A bullet's exportable fields (counters are derived from the usage log, not exported).

    ``bullet`` is a Bullet or a row with the same attribute names.
    """
    return {
        "id": bullet.id,
        "text": bullet.text,
        "tags": list(bullet.tags or []),
        "learned_from": bullet.learned_from,
        "deprecated": bullet.status == "deprecated",
        "demoted_on": iso(bullet.demoted_on),
        "demoted_reason": bullet.demoted_reason,
        "section": bullet.section,
        "scope": bullet.scope,
        "status": bullet.status,
        "superseded_by": bullet.superseded_by,
        "source": bullet.source,
        "source_url": bullet.source_url,
        # Anchors to code (None: unanchored); CSV writes them comma-separated like tags.
        "paths": list(bullet.paths) if bullet.paths else None,
        "symbols": list(bullet.symbols) if bullet.symbols else None,
        "created_at": iso(bullet.created_at),
        "updated_at": iso(bullet.updated_at),
    }


_RECORD_COLUMNS = (
    Bullet.id,
    Bullet.text,
    Bullet.tags,
    Bullet.learned_from,
    Bullet.demoted_on,
    Bullet.demoted_reason,
    Bullet.section,
    Bullet.scope,
    Bullet.status,
    Bullet.superseded_by,
    Bullet.source,
    Bullet.source_url,
    Bullet.paths,
    Bullet.symbols,
    Bullet.created_at,
    Bullet.updated_at,
)


def bullet_records(
    session: Session, statuses: Collection[str] | None = None
) -> Iterator[dict[str, Any]]:
    """Every bullet's record (or those in ``statuses``), `pb-2` before `pb-10`, streamed.

    Plain rows, not ORM objects, fetched a chunk at a time (a server-side cursor on
    PostgreSQL), so exporting a large playbook holds one chunk in memory.
    """
    query = select(*_RECORD_COLUMNS).order_by(Bullet.number.is_(None), Bullet.number, Bullet.id)
    if statuses is not None:
        query = query.where(Bullet.status.in_(list(statuses)))
    for row in session.execute(query.execution_options(yield_per=EXPORT_CHUNK)):
        yield bullet_record(row)


def write_bullets(
    session: Session, out: IO[str], fmt: Format, statuses: Collection[str] | None = None
) -> int:
    """Write every bullet (or those in ``statuses``) to ``out`` as they are read; the count."""
    if fmt not in ("yaml", "jsonl", "csv"):
        raise InvalidInput(f"unknown format {fmt!r}; use yaml, jsonl or csv")
    writer = None
    if fmt == "csv":
        writer = csv.DictWriter(out, fieldnames=EXPORT_FIELDS, lineterminator="\n")
        writer.writeheader()
    count = 0
    for record in bullet_records(session, statuses):
        count += 1
        if fmt == "yaml":
            # One-item lists written one after the other make one YAML list.
            out.write(
                yaml.dump(
                    [record], Dumper=_YamlDumper, sort_keys=False, allow_unicode=True, width=100
                )
            )
        elif fmt == "jsonl":
            out.write(json.dumps(record, ensure_ascii=False) + "\n")
        else:
            assert writer is not None
            writer.writerow(
                record
                | {
                    "tags": ",".join(record["tags"]),
                    "paths": ",".join(record["paths"] or []),
                    "symbols": ",".join(record["symbols"] or []),
                    "deprecated": "true" if record["deprecated"] else "false",
                }
            )
    if fmt == "yaml" and not count:
        out.write("[]\n")
    return count


def export_bullets(session: Session, fmt: Format, statuses: Collection[str] | None = None) -> str:
    """Every bullet (or those in ``statuses``) as YAML, JSON lines or CSV text."""
    out = stdio.StringIO()
    write_bullets(session, out, fmt, statuses)
    return out.getvalue()

"""Import and export: YAML/JSONL/CSV playbooks and `.lesson-usage.jsonl` usage logs.

An import reads its file twice, streaming: first every entry is checked (nothing is written
when one is bad, and the problems name their lines), then the entries are written in
batches, each committed as it goes, so memory stays flat and a big import shows progress.
Exports write records as the database returns them.
"""

from __future__ import annotations

import csv
import hashlib
import io as stdio
import json
import pickle
import tempfile
from collections.abc import Callable, Collection, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import IO, Any, Literal

import yaml
from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session
from yaml import events as yaml_events
from yaml import nodes as yaml_nodes

from playbook import clock
from playbook.errors import InvalidInput, PlaybookError
from playbook.lessons import bulk, checks, fields, ids, lifecycle
from playbook.lessons.fields import FieldProblem
from playbook.models import Bullet, UsageEvent
from playbook.outcomes import usage
from playbook.search.retrieval import Retriever

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
# Entries written per committed transaction: big enough that commits cost little, small
# enough that a failure loses little work and a progress bar moves.
BATCH_SIZE = 1000
# Problems a refused import lists; the rest are counted.
SHOWN_PROBLEMS = 5
# Rows fetched per round trip while exporting.
_EXPORT_CHUNK = 1000
# The fields of an entry that are passed on as given (None or "" meaning "not given").
_PLAIN_FIELDS = (
    "id",
    "text",
    "section",
    "scope",
    "source",
    "source_url",
    "tags",
    "status",
    "created_at",
    "updated_at",
)
_TRUE = ("true", "yes", "1", "on")
_FALSE = ("false", "no", "0", "off", "")
_LIVE = ("active", "proposed")
# libyaml parses ten times faster than the pure-Python parser; both give the same events.
_YamlLoader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_YamlDumper: Any = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
Progress = Callable[[int, int], None]


@dataclass
class ImportReport:
    """What an import did."""

    created: int = 0
    updated: int = 0
    unchanged: int = 0
    near_duplicates: int = 0
    events_added: int = 0
    events_duplicate: int = 0

    def summary(self) -> str:
        """One line for people."""
        parts = []
        if (
            self.created
            or self.updated
            or self.unchanged
            or self.near_duplicates
            or not (self.events_added or self.events_duplicate)
        ):
            parts.append(
                f"{self.created} bullets created, {self.updated} updated, "
                f"{self.unchanged} unchanged"
            )
        if self.near_duplicates:
            parts.append(
                f"{self.near_duplicates} skipped as near-duplicates of live bullets in their scope"
            )
        if self.events_added or self.events_duplicate:
            parts.append(
                f"{self.events_added} usage events added, {self.events_duplicate} already imported"
            )
        return "; ".join(parts)


@dataclass(frozen=True)
class Problem:
    """One thing wrong with a file: its line and a sentence naming the field."""

    line: int
    message: str

    def __str__(self) -> str:
        return f"line {self.line}: {self.message}"


class ImportRefused(InvalidInput):
    """A file with invalid entries; nothing of it was written."""

    def __init__(self, source: str, problems: list[Problem], total: int) -> None:
        self.source = source
        self.problems = problems
        self.total = total
        if total == 1:
            message = f"{source}: {problems[0]}; nothing was imported"
        else:
            listed = "; ".join(str(problem) for problem in problems)
            more = "; ..." if total > len(problems) else ""
            message = f"{source}: {total} problems, nothing was imported: {listed}{more}"
        super().__init__(message)


class _Problems:
    """The first few problems of a file by line, and how many there were in all."""

    def __init__(self) -> None:
        self.shown: list[Problem] = []
        self.total = 0

    def add(self, line: int, message: str) -> None:
        self.total += 1
        self.shown.append(Problem(line, message))
        # Usage logs find unknown ids a batch late, so keep the earliest lines, not the first found.
        self.shown.sort(key=lambda problem: problem.line)
        del self.shown[SHOWN_PROBLEMS:]

    def refuse_if_any(self, source: str) -> None:
        if self.total:
            raise ImportRefused(source, self.shown, self.total)


# --- export ----------------------------------------------------------------------------------


def _iso(value: datetime | None) -> str | None:
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
    Bullet.source,
    Bullet.source_url,
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
    for row in session.execute(query.execution_options(yield_per=_EXPORT_CHUNK)):
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


def write_usage(session: Session, out: IO[str]) -> int:
    """Write the usage log to ``out`` as `.lesson-usage.jsonl`, oldest first; the count."""
    query = select(UsageEvent).order_by(UsageEvent.ts, UsageEvent.id)
    count = 0
    for event in session.scalars(query.execution_options(yield_per=_EXPORT_CHUNK)):
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
        out.write(json.dumps({k: v for k, v in record.items() if v is not None}) + "\n")
        count += 1
        if count % _EXPORT_CHUNK == 0:
            # Events are ORM objects here; let each chunk go once it is written.
            session.expunge_all()
    return count


def export_usage(session: Session) -> str:
    """The usage log as `.lesson-usage.jsonl` text, one event per line, oldest first."""
    out = stdio.StringIO()
    write_usage(session, out)
    return out.getvalue()


# --- reading files ---------------------------------------------------------------------------


@dataclass
class Entry:
    """One entry of a file: the line it starts on, its data, and (YAML) each field's line."""

    line: int
    data: Any
    lines: dict[str, int] = field(default_factory=dict)

    def line_of(self, name: str) -> int:
        """The line ``name`` is written on, else the entry's first line."""
        return self.lines.get(name, self.line)


@dataclass(frozen=True)
class Unreadable:
    """An entry that could not even be parsed (stands in for its data)."""

    message: str


class BrokenFile(InvalidInput):
    """The file cannot be read past this line (broken YAML or CSV, bytes that are not UTF-8)."""

    def __init__(self, line: int, message: str) -> None:
        super().__init__(f"line {line}: {message}")
        self.line = line
        self.message = message


def _lines(stream: IO[bytes]) -> Iterator[tuple[int, str]]:
    """(line number, text) of a UTF-8 file read line by line; a byte-order mark is dropped."""
    for number, raw in enumerate(stream, start=1):
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise BrokenFile(number, "is not UTF-8 text") from None
        yield number, (line.removeprefix("\ufeff") if number == 1 else line)


def _json_entries(stream: IO[bytes]) -> Iterator[Entry]:
    for number, line in _lines(stream):
        if not line.strip():
            continue
        try:
            yield Entry(number, json.loads(line))
        except json.JSONDecodeError as error:
            yield Entry(number, Unreadable(f"not JSON ({error.msg})"))
        except (ValueError, RecursionError) as error:
            # Python refuses integers of over 4,300 digits; deep nesting exhausts the stack.
            reason = "nested too deeply" if isinstance(error, RecursionError) else str(error)
            yield Entry(number, Unreadable(f"not usable JSON ({reason})"))


def _csv_entries(stream: IO[bytes]) -> Iterator[Entry]:
    numbered = _lines(stream)
    reader = csv.reader(line for _, line in numbered)
    try:
        header = next(reader, None)
        if header is None:
            return
        names = [name.strip() for name in header]
        if "text" not in names:
            raise BrokenFile(1, "a CSV playbook needs a header row with at least `text`")
        while True:
            start = reader.line_num + 1
            row = next(reader, None)
            if row is None:
                return
            if not any(cell.strip() for cell in row):
                continue
            if len(row) > len(names):
                yield Entry(
                    start,
                    Unreadable(
                        f"has {len(row)} cells but the header has {len(names)}; "
                        "put text holding commas in double quotes"
                    ),
                )
                continue
            yield Entry(start, dict(zip(names, row, strict=False)))
    except csv.Error as error:
        raise BrokenFile(reader.line_num or 1, f"not valid CSV ({error})") from None


_YAML_STR = "tag:yaml.org,2002:str"
_YAML_NULL = "tag:yaml.org,2002:null"
_YAML_MERGE = "tag:yaml.org,2002:merge"
_YAML_SCALARS = tuple(f"tag:yaml.org,2002:{name}" for name in ("bool", "int", "float", "timestamp"))


class _YamlReader:
    """A YAML list read one item at a time from libyaml's events, each with its lines.

    ``yaml.safe_load`` would build the whole file (and ``yaml.compose`` a node with two
    position marks for every scalar of it); building each item straight from the parser's
    events keeps one entry in memory, knows on which line each field is written, and costs
    a third of composing nodes first. Values are what ``yaml.safe_load`` gives; aliases
    (``*name``), merge keys and tags other than YAML's own are refused, so an entry is
    always a plain tree of its own (and a "billion laughs" file is one problem, not a hang).
    """

    def __init__(self, stream: IO[bytes]) -> None:
        self.loader = _YamlLoader(stream)
        self.problem: str | None = None

    def entries(self) -> Iterator[Entry]:
        loader = self.loader
        try:
            loader.get_event()  # stream start
            if loader.check_event(yaml_events.StreamEndEvent):
                return
            loader.get_event()  # document start
            if loader.check_event(yaml_events.SequenceStartEvent):
                yield from self._items()
            elif loader.check_event(yaml_events.MappingStartEvent):
                yield from self._bullets_key()
            else:
                line = loader.peek_event().start_mark.line + 1
                if self._value() is not None or self.problem:
                    raise BrokenFile(line, _NOT_A_LIST)
            loader.get_event()  # document end
            if not loader.check_event(yaml_events.StreamEndEvent):
                line = loader.peek_event().start_mark.line + 1
                raise BrokenFile(
                    line, "a playbook is one YAML document; remove the `---` and after"
                )
        except yaml.MarkedYAMLError as error:
            mark = error.problem_mark or error.context_mark
            where = f" at column {mark.column + 1}" if mark else ""
            why = error.problem or ""
            start = error.context_mark
            if error.context and start and mark and start.line != mark.line:
                # "while parsing a flow sequence" points at the `[` left open lines above.
                why += f" {error.context} at line {start.line + 1}, column {start.column + 1}"
            raise BrokenFile(
                mark.line + 1 if mark else 1, f"not valid YAML{where} ({why})"
            ) from None
        except yaml.YAMLError as error:
            # A ReaderError (bytes that are not text) spans lines; a problem is one line.
            raise BrokenFile(1, f"not valid YAML ({' '.join(str(error).split())})") from None
        except RecursionError:
            raise BrokenFile(1, "not usable YAML (nested too deeply)") from None
        finally:
            loader.dispose()

    def _bullets_key(self) -> Iterator[Entry]:
        loader = self.loader
        start = loader.get_event().start_mark.line + 1
        found = False
        while not loader.check_event(yaml_events.MappingEndEvent):
            key = self._value()
            if key == "bullets" and loader.check_event(yaml_events.SequenceStartEvent):
                found = True
                yield from self._items()
            else:
                self._value()  # another key's value, read and dropped
        loader.get_event()
        if not found:
            raise BrokenFile(start, _NOT_A_LIST)

    def _items(self) -> Iterator[Entry]:
        loader = self.loader
        loader.get_event()  # sequence start
        while not loader.check_event(yaml_events.SequenceEndEvent):
            line = loader.peek_event().start_mark.line + 1
            lines: dict[str, int] = {}
            self.problem = None
            data = self._value(lines)
            yield Entry(line, Unreadable(self.problem) if self.problem else data, lines)
        loader.get_event()

    def _value(self, lines: dict[str, int] | None = None) -> Any:
        """The next value, built from events; a problem is noted and reading goes on.

        ``lines``, when given and the value is a mapping, receives the line of each key's value.
        """
        loader = self.loader
        event = loader.get_event()
        kind = type(event)
        if kind is yaml_events.ScalarEvent:
            return self._scalar(event)
        if kind is yaml_events.SequenceStartEvent:
            self._collection_tag(event, "seq")
            items = []
            while not loader.check_event(yaml_events.SequenceEndEvent):
                items.append(self._value())
            loader.get_event()
            return items
        if kind is yaml_events.MappingStartEvent:
            self._collection_tag(event, "map")
            mapping: dict[Any, Any] = {}
            while not loader.check_event(yaml_events.MappingEndEvent):
                key = self._value()
                if lines is not None and isinstance(key, str):
                    lines[key] = loader.peek_event().start_mark.line + 1
                value = self._value()
                try:
                    mapping[key] = value
                except TypeError:
                    self._note("a list or mapping cannot be a key")
            loader.get_event()
            return mapping
        if kind is yaml_events.AliasEvent:
            self._note(f"aliases such as *{event.anchor} are not read; write the value out")
            return None
        raise yaml.composer.ComposerError(
            None, None, f"unexpected {kind.__name__}", event.start_mark
        )

    def _scalar(self, event: Any) -> Any:
        tag = event.tag
        if tag is None or tag == "!":
            if not event.implicit[0]:
                return event.value  # not plain (quoted, block): a string whatever it says
            tag = self.loader.resolve(yaml_nodes.ScalarNode, event.value, event.implicit)
        if tag == _YAML_STR:
            return event.value
        if tag == _YAML_NULL:
            return None
        if tag not in _YAML_SCALARS:
            self._note(
                "merge keys (<<) are not read; write the fields out"
                if tag == _YAML_MERGE
                else f"the tag {tag} is not read"
            )
            return None
        node = yaml_nodes.ScalarNode(tag, event.value, event.start_mark, event.end_mark)
        try:
            return self.loader.yaml_constructors[tag](self.loader, node)
        except (yaml.YAMLError, ValueError, TypeError, OverflowError) as error:
            # e.g. `created_at: 2026-13-45`, which YAML's own date rule accepts.
            self._note(f"not usable YAML ({getattr(error, 'problem', None) or error})")
            return None

    def _collection_tag(self, event: Any, kind: str) -> None:
        if event.tag not in (None, "!", f"tag:yaml.org,2002:{kind}"):
            self._note(f"the tag {event.tag} is not read")

    def _note(self, problem: str) -> None:
        if self.problem is None:
            self.problem = problem


_NOT_A_LIST = "a YAML playbook is a list of bullets (or a mapping with `bullets:`)"


def read_entries(stream: IO[bytes], fmt: Format) -> Iterator[Entry]:
    """The entries of a playbook file in order, each with its line (and its fields' lines).

    An entry that cannot be parsed holds an Unreadable instead of data; a file that cannot
    be read past some line (broken YAML or CSV) raises BrokenFile naming that line.
    """
    if fmt == "yaml":
        return _YamlReader(stream).entries()
    if fmt == "csv":
        return _csv_entries(stream)
    return _json_entries(stream)


# --- checking and writing bullets ------------------------------------------------------------


def _flag(entry: dict[str, Any]) -> bool | None:
    value = entry.get("deprecated")
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in (*_TRUE, *_FALSE):
        return value.strip().lower() in _TRUE
    raise FieldProblem("deprecated", f"must be true or false, not {fields.describe(value)}")


def bullet_values(entry: Any, *, max_chars: int = fields.MAX_LESSON_CHARS) -> dict[str, Any]:
    """One imported entry as checked bullet values; InvalidInput (FieldProblem) says what is wrong.

    Unknown keys are ignored (teams keep their own); an empty value means "not given", except
    for the demotion fields, where it clears them. Every entry names the ticket it was learned
    from and has a text of at most ``max_chars``.
    """
    values = _entry_values(entry)
    checked = checks.check_fields(values, max_chars=max_chars)
    deprecated = _flag(entry)
    if deprecated is not None and deprecated != (checked.get("status") == "deprecated"):
        raise FieldProblem(
            "deprecated", f"is {str(deprecated).lower()} but status is {checked['status']}"
        )
    return checked


def _entry_values(entry: Any) -> dict[str, Any]:
    """The bullet fields an entry gives, as given (``checks.check_fields`` checks them)."""
    if not isinstance(entry, dict):
        raise InvalidInput(
            "an entry must be a mapping of fields such as text and learned_from, "
            f"not {fields.describe(entry)}"
        )
    values = {key: entry[key] for key in _PLAIN_FIELDS if entry.get(key) not in (None, "")}
    if "text" not in values:
        raise FieldProblem("text", "is missing; a bullet needs some text")
    if entry.get("learned_from") in (None, ""):
        raise FieldProblem("learned_from", checks.LEARNED_FROM_MISSING)
    values["learned_from"] = entry["learned_from"]
    for key in ("demoted_on", "demoted_reason"):
        if key in entry:
            values[key] = entry[key] if entry[key] not in (None, "") else None
    deprecated = _flag(entry)
    if "status" not in values and deprecated is not None:
        values["status"] = "deprecated" if deprecated else "active"
    return values


def _text_key(scope: str, text: str) -> bytes:
    # Sixteen bytes of a digest stand for a text: 100k of them take a few megabytes.
    return hashlib.sha256(f"{scope}\x00{text}".encode()).digest()[:16]


@dataclass
class _Plan:
    """What the checking pass learned for the writing pass."""

    entries: int = 0
    highest_number: int = 0


def _check_bullets(
    entries: Iterable[Entry], source: str, max_chars: int, spool: IO[bytes]
) -> _Plan:
    """Check every entry; while all are good, keep their checked values in ``spool``."""
    plan = _Plan()
    problems = _Problems()
    seen: dict[str, int] = {}
    try:
        for entry in entries:
            plan.entries += 1
            if isinstance(entry.data, Unreadable):
                problems.add(entry.line, entry.data.message)
                continue
            try:
                values = bullet_values(entry.data, max_chars=max_chars)
            except FieldProblem as problem:
                problems.add(entry.line_of(problem.field), str(problem))
                continue
            except InvalidInput as problem:
                problems.add(entry.line, str(problem))
                continue
            bullet_id = values.get("id")
            if bullet_id is not None:
                line = entry.line_of("id")
                if bullet_id in seen:
                    problems.add(line, f"id: {bullet_id} is already used on line {seen[bullet_id]}")
                    continue
                seen[bullet_id] = line
                number = ids.canonical_number(bullet_id)
                plan.highest_number = max(plan.highest_number, number or 0)
            if not problems.total:
                pickle.dump(values, spool, protocol=pickle.HIGHEST_PROTOCOL)
    except BrokenFile as fatal:
        problems.add(fatal.line, fatal.message)
    problems.refuse_if_any(source)
    return plan


def _unspool(spool: IO[bytes]) -> Iterator[dict[str, Any]]:
    """The values `_check_bullets` kept, in order (a file of our own, written just before)."""
    spool.seek(0)
    while True:
        try:
            yield pickle.load(spool)  # our own temporary file, never input
        except EOFError:
            return


class _BatchTexts:
    """The live texts of the batch being written, to find near-duplicates among them.

    Stored bullets are compared by `lifecycle.find_near_duplicate`; entries of this batch are
    not stored yet, so they are compared here, by the same overlap rule. A text sharing at
    least DUPLICATE_OVERLAP of the larger word set misses at most the rest of ``text``'s
    words, so it holds one of any that many-plus-one of them: looking up only ``text``'s
    rarest words finds every candidate (a prefix filter), without comparing all pairs.
    """

    def __init__(self) -> None:
        self.texts: list[str] = []
        self.postings: dict[tuple[str, str], list[int]] = {}

    def add(self, scope: str, text: str) -> None:
        position = len(self.texts)
        self.texts.append(text)
        for word in lifecycle.overlap_words(text):
            self.postings.setdefault((scope, word), []).append(position)

    def near(self, scope: str, text: str) -> bool:
        words = lifecycle.overlap_words(text)
        if not words or not self.texts:
            return False
        # One more than the words a near-duplicate may miss, and one more for float rounding.
        probe = int(len(words) * (1 - lifecycle.DUPLICATE_OVERLAP)) + 2
        rarest = sorted(words, key=lambda word: len(self.postings.get((scope, word), ())))
        candidates = {i for word in rarest[:probe] for i in self.postings.get((scope, word), ())}
        return any(
            lifecycle.word_overlap(text, self.texts[i]) >= lifecycle.DUPLICATE_OVERLAP
            for i in candidates
        )

    def clear(self) -> None:
        self.texts.clear()
        self.postings.clear()


class _BulletWriter:
    """The writing pass: entries are gathered into a batch, checked, and written together.

    An entry with an id is written as given. One without is a lesson a team kept without
    ids: it is skipped when its scope already has the same text, or (while it would be
    live) a near-duplicate, stored or earlier in the batch, as `add` would skip it.
    """

    def __init__(
        self, session: Session, report: ImportReport, *, actor: str, reason: str, plan: _Plan
    ) -> None:
        self.session = session
        self.report = report
        self.actor = actor
        self.reason = reason
        self.plan = plan
        self.pending: list[dict[str, Any]] = []
        self.batch = _BatchTexts()
        self.known_texts: set[bytes] | None = None

    def add(self, values: dict[str, Any]) -> None:
        scope, text = values.get("scope", "global"), values["text"]
        live = values.get("status", "active") in _LIVE
        if "id" not in values:
            known = self._texts()
            key = _text_key(scope, text)
            if key in known:
                self.report.unchanged += 1
                return
            # A deprecated or archived entry is a record of the past, kept as it is.
            if live and (
                self.batch.near(scope, text)
                or lifecycle.find_near_duplicate(self.session, text, scope)
            ):
                self.report.near_duplicates += 1
                return
            known.add(key)
        elif self.known_texts is not None:
            self.known_texts.add(_text_key(scope, text))
        if live:
            self.batch.add(scope, text)
        self.pending.append(values)

    def flush(self, max_chars: int) -> None:
        if not self.pending:
            return
        done = bulk.put_many(
            self.session,
            self.pending,
            actor=self.actor,
            reason=self.reason,
            max_chars=max_chars,
            numbers_above=self.plan.highest_number,
        )
        self.pending = []
        self.batch.clear()
        for put in done:
            if put.outcome == "created":
                self.report.created += 1
            elif put.outcome == "updated":
                self.report.updated += 1
            else:
                self.report.unchanged += 1

    def _texts(self) -> set[bytes]:
        # Loaded once, at the first entry without an id: "is this text already there?" is
        # then a set lookup instead of a query per entry.
        if self.known_texts is None:
            rows = self.session.execute(
                select(Bullet.scope, Bullet.text).execution_options(yield_per=_EXPORT_CHUNK)
            )
            self.known_texts = {_text_key(scope, text) for scope, text in rows}
            self.known_texts.update(
                _text_key(v.get("scope", "global"), v["text"]) for v in self.pending
            )
        return self.known_texts


def import_bullets(
    session: Session,
    opener: Callable[[], IO[bytes]],
    fmt: Format,
    *,
    actor: str,
    source_name: str,
    max_chars: int = fields.MAX_LESSON_CHARS,
    batch_size: int = BATCH_SIZE,
    progress: Progress | None = None,
) -> ImportReport:
    """Check every entry of a file, then create or update its bullets in committed batches.

    ``opener`` opens the file. A file with any bad entry raises ImportRefused naming the
    first few by line, and writes nothing. The file is read once: the checked values wait
    in a temporary file, so neither pass holds the whole file in memory nor parses it twice.
    Then every ``batch_size`` entries are committed, so an interrupted import keeps what it
    wrote, and importing the file again skips what is already there (the same file twice
    changes nothing).
    """
    with tempfile.TemporaryFile(prefix="playbook-import-") as spool:
        with opener() as stream:
            plan = _check_bullets(read_entries(stream, fmt), source_name, max_chars, spool)
        report = ImportReport()
        writer = _BulletWriter(
            session, report, actor=actor, reason=f"import from {source_name}", plan=plan
        )
        done = 0
        for values in _unspool(spool):
            writer.add(values)
            done += 1
            if done % batch_size == 0:
                writer.flush(max_chars)
                _commit(session)
                if progress is not None:
                    progress(done, plan.entries)
    writer.flush(max_chars)
    _commit(session)
    # Saved now, the index is loaded by the next process to search or add, instead of every
    # imported lesson being tokenized again there.
    Retriever.shared(session).checkpoint(session)
    _commit(session)
    if progress is not None:
        progress(done, plan.entries)
    return report


def _commit(session: Session) -> None:
    session.commit()
    # Nothing written is needed again: drop it, so memory stays flat however long the file.
    session.expunge_all()


# --- usage logs ------------------------------------------------------------------------------


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
    problems = _Problems()
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
        total = _check_usage(session, _json_entries(stream), source_name)
    report = ImportReport()
    done = 0
    batch: list[Entry] = []
    with opener() as stream:
        for entry in _json_entries(stream):
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
    _commit(session)
    report.events_added += added
    report.events_duplicate += duplicate
    return len(batch)


# --- files -----------------------------------------------------------------------------------

_SUFFIXES = (".yaml", ".yml", ".jsonl", ".ndjson", ".json", ".csv")


def _first_line(path: Path) -> str:
    with path.open("rb") as stream:
        for raw in stream:
            line = raw.decode("utf-8", errors="replace").lstrip("\ufeff").strip()
            if line:
                return line
    return ""


def _looks_like_usage(first: str) -> bool:
    try:
        data = json.loads(first)
    except (ValueError, RecursionError):
        return False
    return isinstance(data, dict) and ("event" in data or "lessonIds" in data)


def import_file(
    session: Session,
    path: Path,
    *,
    actor: str,
    max_chars: int = fields.MAX_LESSON_CHARS,
    batch_size: int = BATCH_SIZE,
    progress: Progress | None = None,
) -> ImportReport:
    """Import bullets (.yaml/.yml, .jsonl, .json, .csv) or a usage log (.jsonl with events).

    The file is checked whole before anything is written (ImportRefused lists its problems
    by line); then it is written in batches of ``batch_size``, each committed, with
    ``progress(done, total)`` called after each.
    """
    suffix = path.suffix.lower()
    if suffix not in _SUFFIXES:
        raise InvalidInput(
            f"{path} has an unknown extension; use .yaml, .jsonl, .csv or a .lesson-usage.jsonl"
        )
    try:
        before = path.stat()
        if path.is_dir():
            raise InvalidInput(f"{path} is a directory, not a file")
        first = _first_line(path)
    except FileNotFoundError:
        raise InvalidInput(f"{path} does not exist") from None
    except OSError as error:
        raise InvalidInput(f"cannot read {path} ({error.strerror})") from None

    @contextmanager
    def opener() -> Iterator[IO[bytes]]:
        now = path.stat()
        if (now.st_size, now.st_mtime_ns) != (before.st_size, before.st_mtime_ns):
            raise InvalidInput(f"{path} changed while it was being imported; import it again")
        with path.open("rb") as stream:
            yield stream

    common: dict[str, Any] = {"batch_size": batch_size, "progress": progress}
    fmt: Format
    if suffix in (".yaml", ".yml") or (suffix == ".json" and first.startswith("[")):
        fmt = "yaml"  # a JSON array is YAML too, and YAML's reader knows its lines
    elif suffix == ".csv":
        fmt = "csv"
    elif _looks_like_usage(first):
        return import_usage(session, opener, source_name=path.name, **common)
    else:
        fmt = "jsonl"
    return import_bullets(
        session,
        opener,
        fmt,
        actor=actor,
        source_name=path.name,
        max_chars=max_chars,
        **common,
    )

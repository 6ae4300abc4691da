"""Importing playbooks: every entry of a YAML, JSON lines or CSV file checked, then written.

An import reads its file twice, streaming: first every entry is checked (nothing is written
when one is bad, and the problems name their lines), then the entries are written in
batches, each committed as it goes, so memory stays flat and a big import shows progress.
"""

from __future__ import annotations

import hashlib
import json
import pickle
import tempfile
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from playbook.errors import InvalidInput
from playbook.lessons import bulk, checks, fields, ids, lifecycle
from playbook.lessons.fields import FieldProblem
from playbook.models import Bullet
from playbook.search.retrieval import Retriever
from playbook.transfer.export import EXPORT_CHUNK
from playbook.transfer.formats import BrokenFile, Entry, Format, Unreadable, read_entries
from playbook.transfer.reports import BATCH_SIZE, ImportReport, Problems, Progress, commit
from playbook.transfer.usage_log import import_usage

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
    "superseded_by",
    "paths",
    "symbols",
    "created_at",
    "updated_at",
)
_TRUE = ("true", "yes", "1", "on")
_FALSE = ("false", "no", "0", "off", "")
_LIVE = ("active", "proposed")


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
    problems = Problems()
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
        self.scopes: list[str] = []
        self.postings: dict[tuple[str, str], list[int]] = {}
        self.indexed = 0  # texts[:indexed] are in the postings

    def add(self, scope: str, text: str) -> None:
        # Words are read at the next `near`: an export (every entry with an id) never asks.
        self.texts.append(text)
        self.scopes.append(scope)

    def near(self, scope: str, text: str) -> bool:
        words = lifecycle.overlap_words(text)
        if not words or not self.texts:
            return False
        for position in range(self.indexed, len(self.texts)):
            key = self.scopes[position]
            for word in lifecycle.overlap_words(self.texts[position]):
                self.postings.setdefault((key, word), []).append(position)
        self.indexed = len(self.texts)
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
        self.scopes.clear()
        self.postings.clear()
        self.indexed = 0


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
            checked=True,  # by `_check_bullets`, before anything was written
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
                select(Bullet.scope, Bullet.text).execution_options(yield_per=EXPORT_CHUNK)
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
                commit(session)
                if progress is not None:
                    progress(done, plan.entries)
    writer.flush(max_chars)
    commit(session)
    # Saved now, the index is loaded by the next process to search or add, instead of every
    # imported lesson being tokenized again there.
    Retriever.shared(session).checkpoint(session)
    commit(session)
    if progress is not None:
        progress(done, plan.entries)
    return report


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

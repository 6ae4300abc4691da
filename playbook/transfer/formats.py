"""Reading YAML, JSON lines and CSV files entry by entry, each entry with the lines it is on."""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import IO, Any, Literal

import yaml
from yaml import events as yaml_events
from yaml import nodes as yaml_nodes

from playbook.errors import InvalidInput

Format = Literal["yaml", "jsonl", "csv"]
# libyaml parses ten times faster than the pure-Python parser; both give the same events.
_YamlLoader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


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


def json_entries(stream: IO[bytes]) -> Iterator[Entry]:
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
    return json_entries(stream)

"""Outside text escaped for a log line or a terminal: no control, bidi or invisible character
reaches either raw, so no value can forge a line, move the cursor or retitle the window."""

from __future__ import annotations

import sys
import traceback
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from types import TracebackType
from typing import Any, TextIO

# The only characters our own layout writes that are not printable: a value never keeps them.
LAYOUT = "\n\t"
_NOT_CAUSE = "\nDuring handling of the above exception, another exception occurred:\n\n"
_CAUSE = "\nThe above exception was the direct cause of the following exception:\n\n"
# A cause chain longer than this is cut: a traceback is a diagnosis, not a dump.
MAX_CHAIN = 50


def _escape(char: str) -> str:
    # Python's own spelling: \x1b, \n, \t, \x9b, \u202e, \U000e0001.
    return char.encode("unicode_escape").decode("ascii")


def _escaped_line(line: str, keep: str) -> str:
    if line.isprintable():  # the common case, decided in C
        return line
    return "".join(c if c.isprintable() or c in keep else _escape(c) for c in line)


def escaped(value: object) -> str:
    """``value`` as one line of visible text: every character Python does not call printable
    (C0 with newline and tab, DEL, C1, bidi and other format characters, line separators)
    written as its escape, such as ``\\x1b``, ``\\n`` or ``\\u202e``.

    For any value from outside (a settings key, a ticket's key, a delivery id, an error's
    message) interpolated into a log line or a terminal line."""
    return _escaped_line(str(value), "")


def terminal(text: str) -> str:
    """``text`` with every non-printable character escaped except the newlines and tabs of our
    own layout: the last guard before a terminal, which values should already have passed
    through :func:`escaped` (an escape sequence, a carriage return or a bidi override never
    comes from us)."""
    if text.isprintable():
        return text
    return "\n".join(_escaped_line(line, LAYOUT) for line in text.split("\n"))


def json_text(text: str) -> str:
    """JSON text with the non-printable characters ``json.dumps(ensure_ascii=False)`` leaves raw
    (DEL, C1, bidi and format characters) written as ``\\uXXXX``: still the same JSON value.

    Outside ``json.dumps``'s strings only our indentation's newlines and spaces appear, and
    inside them it already escaped C0, so every character changed here is inside a string."""
    if text.isprintable():
        return text
    return "\n".join(_json_line(line) for line in text.split("\n"))


def _json_line(line: str) -> str:
    if line.isprintable():
        return line
    return "".join(c if c.isprintable() else _json_escape(c) for c in line)


def _json_escape(char: str) -> str:
    code = ord(char)
    if code < 0x10000:
        return f"\\u{code:04x}"
    code -= 0x10000  # a UTF-16 surrogate pair, as JSON spells characters beyond the BMP
    return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"


def traceback_text(
    kind: type[BaseException] | None,
    error: BaseException | None,
    trace: TracebackType | None,
    scrub: Callable[[str], str] | None = None,
) -> str:
    """The traceback the logging module would print, with each exception's message escaped to
    one line: frames name our code, but a message may quote outside text (a key, a URL, a
    file's line), so a message can never start a line of its own.

    ``scrub`` (the log's credential masking) sees each message before it is escaped: masking
    reads the text as it was written, not its escapes."""
    return _traceback_text(kind, error, trace, 0, scrub or (lambda text: text))


def _traceback_text(
    kind: type[BaseException] | None,
    error: BaseException | None,
    trace: TracebackType | None,
    depth: int,
    scrub: Callable[[str], str],
) -> str:
    if error is None:
        return escaped(kind.__name__ if kind is not None else "NoneType: None")
    chain = _chain(error)
    parts: list[str] = []
    for position, (link, joint) in enumerate(chain):
        if position:
            parts.append(joint)
        frames = trace if link is error else link.__traceback__
        if frames is not None:
            parts.append("Traceback (most recent call last):\n")
            parts.extend(terminal(entry) for entry in traceback.format_tb(frames))
        message = "".join(traceback.format_exception_only(type(link), link)).rstrip("\n")
        parts.append(escaped(scrub(message)) + "\n")
        if isinstance(link, BaseExceptionGroup) and depth < MAX_CHAIN:
            # A task group's failures (the MCP server's anyio): each told, indented.
            for number, inner in enumerate(link.exceptions[:MAX_CHAIN], start=1):
                told = _traceback_text(type(inner), inner, inner.__traceback__, depth + 1, scrub)
                parts.append(f"  +-- {number} --\n")
                parts.extend(f"  | {line}\n" for line in told.split("\n"))
    return "".join(parts).rstrip("\n")


def _chain(error: BaseException) -> list[tuple[BaseException, str]]:
    """``error`` and the exceptions behind it, oldest first, each with the sentence that joins
    it to the one before it (as Python prints them; the oldest's is empty)."""
    links: list[tuple[BaseException, str]] = []
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen and len(links) < MAX_CHAIN:
        seen.add(id(current))
        if current.__cause__ is not None:
            links.append((current, _CAUSE))
            current = current.__cause__
        elif current.__context__ is not None and not current.__suppress_context__:
            links.append((current, _NOT_CAUSE))
            current = current.__context__
        else:
            links.append((current, ""))
            current = None
    # Printed oldest first: each link's joint is the sentence printed before it.
    links.reverse()
    return links


class GuardedStream:
    """A text stream that writes through :func:`terminal`: whatever a command prints, no raw
    escape sequence, carriage return or bidi override reaches the terminal or a captured log.

    Everything else (``encoding``, ``isatty``, ``fileno``, ``buffer`` for binary protocols such
    as the MCP server's) is the wrapped stream's; ``raw`` is the stream itself, for data that
    must stay byte for byte (an export written to stdout).
    """

    def __init__(self, raw: TextIO) -> None:
        self.raw = raw

    def write(self, text: str) -> int:
        """Write ``text`` with its non-printable characters escaped, but for newlines and tabs."""
        if isinstance(text, str):
            self.raw.write(terminal(text))
            return len(text)  # what the caller handed over, as io's write answers
        return self.raw.write(text)  # bytes: the wrapped stream refuses them as it would

    def writelines(self, lines: Iterable[str]) -> None:
        """Write each line through :meth:`write`."""
        for line in lines:
            self.write(line)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.raw, name)


def unguarded(stream: Any) -> Any:
    """The stream under a :class:`GuardedStream` (or ``stream`` itself)."""
    return stream.raw if isinstance(stream, GuardedStream) else stream


@contextmanager
def guarded_output() -> Iterator[None]:
    """Within the block, ``sys.stdout`` and ``sys.stderr`` write through :func:`terminal`."""
    if isinstance(sys.stdout, GuardedStream) or sys.stdout is None or sys.stderr is None:
        yield  # already guarded (a nested group), or no stream to guard (pythonw)
        return
    out, err = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = GuardedStream(out), GuardedStream(err)  # type: ignore[assignment]
    try:
        yield
    finally:
        sys.stdout, sys.stderr = out, err

"""The anchors of lessons imported from a rule file: its front matter's globs, or its folder.

- Cursor's ``.mdc`` ``globs``, Copilot's ``.instructions.md`` ``applyTo`` and Claude Code's
  ``.claude/rules`` ``paths``: a comma-separated string or a YAML list of globs, each one
  with ``{a,b}`` alternatives expanded (the anchors matcher has no braces). A rule that
  applies always (Cursor's ``alwaysApply: true``) anchors nothing.
- A nested ``AGENTS.md`` (``services/payments/AGENTS.md``) is about its folder:
  ``services/payments/**``. The root's anchors nothing.

A glob the anchors validator refuses (``..``, absolute, too long), or one matching every file
(``**``), is dropped with a note for the import's report; never an error.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import PurePosixPath

from playbook.anchors.fields import MAX_PATHS, PATH_CHARS, check_path
from playbook.lessons.fields import FieldProblem

# Front matter keys that hold globs, per format.
GLOB_KEYS = ("globs", "applyTo", "paths")
# One key's text read at most (a few globs), and the alternatives one glob expands to.
MAX_GLOBS_CHARS = 2_000
MAX_EXPANDED = 20
_SHOWN = 60
# The files whose folder is what their lessons are about.
_BY_FOLDER = frozenset({"agents.md"})


@dataclass(frozen=True)
class Anchors:
    """A rule file's anchors for its lessons (None: unanchored) and what was dropped, and why."""

    paths: tuple[str, ...] | None
    notes: tuple[str, ...] = ()


def _split(text: str) -> list[str]:
    """Comma-separated globs, a comma inside ``{...}`` kept (``*.{ts,tsx}`` is one glob)."""
    parts, depth, start = [], 0, 0
    for index, char in enumerate(text):
        if char == "{":
            depth += 1
        elif char == "}" and depth:
            depth -= 1
        elif char == "," and not depth:
            parts.append(text[start:index])
            start = index + 1
    parts.append(text[start:])
    return parts


def _expanded(glob: str) -> list[str]:
    """``glob`` with its ``{a,b}`` alternatives written out, at most MAX_EXPANDED of them."""
    done: list[str] = []
    pending = [glob]
    while pending and len(done) < MAX_EXPANDED:
        current = pending.pop(0)
        opening = current.find("{")
        closing = current.find("}", opening + 1) if opening != -1 else -1
        if opening == -1 or closing == -1 or "{" in current[opening + 1 : closing]:
            done.append(current)  # no alternatives left (or nested ones: taken as written)
            continue
        head, tail = current[:opening], current[closing + 1 :]
        pending[:0] = [head + choice + tail for choice in current[opening + 1 : closing].split(",")]
    return done


def raw_globs(value: object) -> list[str] | None:
    """The globs of a front matter value (text or a list of texts); None when it has none."""
    if isinstance(value, str):
        items = _split(value[:MAX_GLOBS_CHARS])
    elif isinstance(value, list):
        items = [item for item in value[: MAX_PATHS * 2] if isinstance(item, str)]
    else:
        return None
    cleaned = [item.strip().strip("'\"").strip() for item in items]
    return [item for item in cleaned if item] or None


def _everything(glob: str) -> bool:
    parts = [part for part in glob.split("/") if part]
    return "**" in parts and all(part in ("*", "**") for part in parts)


def _shown(glob: str) -> str:
    return repr(glob if len(glob) <= _SHOWN else glob[:_SHOWN] + "...")


def from_globs(globs: Sequence[str]) -> Anchors:
    """The anchors a rule's globs give, each checked; those refused are named in the notes."""
    paths: dict[str, None] = {}
    notes: list[str] = []
    for raw in globs:
        for glob in _expanded(raw[: PATH_CHARS * 2]):
            try:
                path = check_path(glob)
            except FieldProblem as problem:
                notes.append(f"glob not used as an anchor: {problem.why}")
                continue
            if not path:
                continue
            if _everything(path):
                notes.append(f"glob {_shown(glob)} matches every file: it anchors nothing")
                continue
            paths.setdefault(path, None)
    if len(paths) > MAX_PATHS:
        dropped = list(paths)[MAX_PATHS:]
        notes.append(
            f"{len(dropped)} globs over the {MAX_PATHS} a lesson may have not used as anchors: "
            + ", ".join(map(_shown, dropped[:3]))
            + (", ..." if len(dropped) > 3 else "")
        )
    return Anchors(tuple(list(paths)[:MAX_PATHS]) or None, tuple(notes))


def of_file(where: str | None, front: dict[str, object]) -> Anchors:
    """The anchors of the lessons of the rule file at repository path ``where``.

    ``front`` is its front matter; ``where`` None when its place in the repository is not
    known (a file named by a path outside the folder the import runs in).
    """
    if front.get("alwaysApply") in (True, "true"):  # "true": front matter read line by line
        return Anchors(None)
    for key in GLOB_KEYS:
        globs = raw_globs(front.get(key))
        if globs:
            return from_globs(globs)
    if where is None:
        return Anchors(None)
    path = PurePosixPath(where)
    if path.name.lower() not in _BY_FOLDER or path.parent == PurePosixPath("."):
        return Anchors(None)
    return from_globs([f"{path.parent.as_posix()}/**"])

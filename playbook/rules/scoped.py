"""Path-scoped rule files: anchored lessons grouped by area, written in each agent's format.

The AGENTS.md sync can write, beside its block, one file per area of the code for each agent
a repository's settings name (`agents_md.scoped`), which the agent loads only when it works on
matching files:

- copilot: ``.github/instructions/playbook-<area>.instructions.md``, front matter
  ``applyTo: "glob1,glob2"`` (one quoted, comma-separated string, as GitHub's docs write it);
- cursor: ``.cursor/rules/playbook-<area>.mdc``, front matter ``description``,
  ``globs: glob1,glob2`` (unquoted and without spaces: Cursor reads the line as written and
  would keep quotes as part of the glob) and ``alwaysApply: false``;
- claude: ``.claude/rules/playbook-<area>.md``, front matter ``paths:`` as a YAML list of
  quoted globs.

Everything here is pure: which lessons go to which area (`split`), their globs in the agents'
dialect (`agent_globs`), and each file's text (`render`). Lesson text never reaches a front
matter: it stays in the lesson lines, made one line and inert as the block makes it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.orm import Session

from playbook.anchors.globs import split_path
from playbook.models import Bullet
from playbook.rules import END, START
from playbook.rules.block import Entry, line, one_line

# More area files than this and the smallest areas share one file (`OTHER`): an agent's rules
# directory stays readable, and a sync commits a bounded number of files.
MAX_AREAS = 20
SLUG_CHARS = 40
OTHER = "other"
# Lessons whose globs start with a wildcard (`**/test_*.py`) have no directory to name.
ANYWHERE = "any"
# The line that makes a file the bot's: only a `playbook-*` file holding it is ever rewritten
# or deleted (a person's file of the same name is left alone, and its name avoided).
MARKER = (
    "<!-- Managed by playbook-bot: this file is rewritten on each sync. Change the lessons in "
    "the playbook, or remove this line to keep the file as yours. -->"
)
# Lines a marker is looked for in: the front matter and the title come first.
_MARKER_LINES = 40
# What an anchor may hold to be written in an agent's glob: no comma (the lists are
# comma-separated), quote, space, brace or colon, which the agents' readers or YAML take for
# syntax. A lesson with another character keeps its place in the block.
_GLOB = re.compile(r"[\w.\-/*?\[\]!+@=~%]+")
# A first character YAML reads as plain text: Cursor's unquoted `globs:` line stays YAML.
_PLAIN_FIRST = re.compile(r"[\w.]")
_WILDCARDS = frozenset("*?[")
_STARS = re.compile(r"\*+")


@dataclass(frozen=True)
class Format:
    """One agent's path-scoped rule files: where they live and how they are named."""

    name: str
    directory: str
    suffix: str

    def path(self, slug: str) -> str:
        """The file of area ``slug``."""
        return f"{self.directory}/playbook-{slug}{self.suffix}"

    def slug_of(self, path: str) -> str | None:
        """The area a ``playbook-<area>`` file of this format is for, or None if it is not one."""
        directory, _, name = path.rpartition("/")
        if directory != self.directory or not name.endswith(self.suffix):
            return None
        found = _NAME.fullmatch(name.removesuffix(self.suffix))
        return found.group(1) if found else None


_NAME = re.compile(rf"playbook-([a-z0-9](?:[a-z0-9-]{{0,{SLUG_CHARS - 1}}}))")

FORMATS: dict[str, Format] = {
    "copilot": Format("copilot", ".github/instructions", ".instructions.md"),
    "cursor": Format("cursor", ".cursor/rules", ".mdc"),
    "claude": Format("claude", ".claude/rules", ".md"),
}


@dataclass(frozen=True)
class Area:
    """Lessons about one part of the code, and the globs (agents' dialect) their file loads on."""

    slug: str
    globs: tuple[str, ...]
    entries: tuple[Entry, ...]


def agent_globs(paths: Sequence[str] | None) -> list[str] | None:
    """A lesson's anchors as globs every agent reads alike, or None when one cannot be written.

    Our globs go segment by segment: ``**`` spans any number of segments, ``*``, ``?`` and
    ``[...]`` stay within one, and a glob without a wildcard names a file or a directory:
    ``orders`` is written as ``orders`` and ``orders/**``. ``**`` inside a segment is one
    ``*``. A glob of only ``**`` matches everything and is left out, as matching leaves it.
    """
    found: dict[str, None] = {}
    for path in paths or ():
        parts = list(split_path(path) or ())
        if path.endswith("/") and parts:
            parts.append("**")
        if not parts or all(part == "**" for part in parts):
            continue
        parts = [part if part == "**" else _STARS.sub("*", part) for part in parts]
        glob = "/".join(parts)
        if not _GLOB.fullmatch(glob) or glob.startswith("!"):
            return None  # kept whole in the block: never shown for fewer files than it names
        found.setdefault(glob, None)
        if not _WILDCARDS & set(glob):
            found.setdefault(f"{glob}/**", None)
    return list(found) or None


def _key(glob: str) -> str:
    """The area a glob is about: its first segment when that is a name, else `ANYWHERE`."""
    first = glob.split("/", 1)[0]
    return ANYWHERE if _WILDCARDS & set(first) else first


def slug(text: str) -> str:
    """``text`` as an area's file name part: ``[a-z0-9-]``, at most SLUG_CHARS, never empty."""
    made = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:SLUG_CHARS].strip("-")
    return made or "files"


def _unique(wanted: str, used: set[str]) -> str:
    if wanted not in used:
        return wanted
    number = 2
    while True:
        suffix = f"-{number}"
        candidate = wanted[: SLUG_CHARS - len(suffix)].rstrip("-") + suffix
        if candidate not in used:
            return candidate
        number += 1


def split(
    entries: Sequence[Entry],
    anchors: Mapping[str, Sequence[str] | None],
    *,
    taken: frozenset[str] = frozenset(),
    most: int = MAX_AREAS,
) -> tuple[list[Entry], list[Area]]:
    """The lessons that stay in the block, and the areas the anchored ones go to.

    A lesson's area is its first glob's first directory (``orders/**`` -> ``orders``; a glob
    starting with a wildcard -> ``any``). Beyond ``most`` areas, the largest keep their own
    file and the rest share one, ``other``. Slugs are unique and avoid ``taken`` (names of
    files that are not the bot's): a collision gets ``-2``, ``-3``, ... in the order of the
    areas' names. Lessons keep their order (helpful first) within an area; areas are ordered
    by slug.
    """
    block: list[Entry] = []
    groups: dict[str, list[tuple[Entry, list[str]]]] = {}
    for entry in entries:
        globs = agent_globs(anchors.get(entry.bullet_id))
        if globs is None:
            block.append(entry)
            continue
        groups.setdefault(_key(globs[0]), []).append((entry, globs))
    if len(groups) > most:
        ranked = sorted(groups, key=lambda key: (-len(groups[key]), key))
        keep = set(ranked[: max(most - 1, 0)])
        rank = {entry.bullet_id: index for index, entry in enumerate(entries)}
        merged = sorted(
            (item for key in groups if key not in keep for item in groups[key]),
            key=lambda item: rank[item[0].bullet_id],
        )
        groups = {key: groups[key] for key in groups if key in keep}
        named: list[tuple[str, list[tuple[Entry, list[str]]]]] = [
            (slug(key), groups[key]) for key in sorted(groups)
        ]
        named.append((OTHER, merged))
    else:
        named = [(slug(key), groups[key]) for key in sorted(groups)]
    used = set(taken)
    areas: list[Area] = []
    for wanted, items in named:
        chosen = _unique(wanted, used)
        used.add(chosen)
        globs: dict[str, None] = {}
        for _, lesson_globs in items:
            globs.update(dict.fromkeys(lesson_globs))
        # Sorted for a stable file; one a YAML reader takes as plain text first (Cursor's line).
        ordered = sorted(globs, key=lambda glob: (not _PLAIN_FIRST.match(glob), glob))
        areas.append(Area(chosen, tuple(ordered), tuple(entry for entry, _ in items)))
    return block, sorted(areas, key=lambda area: area.slug)


def anchors_of(session: Session, ids: Sequence[str]) -> dict[str, list[str] | None]:
    """The `paths` of the lessons ``ids``, by id (None for a lesson without anchors)."""
    found: dict[str, list[str] | None] = {}
    chunk = 500
    for start in range(0, len(ids), chunk):
        rows = session.execute(
            select(Bullet.id, Bullet.paths).where(Bullet.id.in_(list(ids[start : start + chunk])))
        )
        for bullet_id, paths in rows:
            found[bullet_id] = [p for p in paths if isinstance(p, str)] if paths else None
    return found


def _quoted(text: str) -> str:
    """``text`` as a YAML double-quoted scalar."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _front_matter(fmt: Format, area: Area) -> list[str]:
    if fmt.name == "copilot":
        return ["---", f"applyTo: {_quoted(','.join(area.globs))}", "---"]
    if fmt.name == "cursor":
        return [
            "---",
            f"description: Lessons playbook-bot learned about {area.slug}, rewritten by the bot",
            f"globs: {','.join(area.globs)}",
            "alwaysApply: false",
            "---",
        ]
    return ["---", "paths:", *(f"  - {_quoted(glob)}" for glob in area.globs), "---"]


def render(fmt: Format, area: Area, *, scope: str) -> bytes:
    """The whole file of ``area`` for agent ``fmt``: front matter, the marker, the lessons.

    The lessons sit between the block's markers, so the rule importer skips them as it skips
    the block (the bot's lessons must not come back as new ones).
    """
    header = (
        f"<!-- Lessons from playbook-bot for {one_line(scope)} about {area.slug} (cite an id "
        "such as [pb-12] in your PR when a lesson helped). -->"
    )
    lines = [
        *_front_matter(fmt, area),
        "",
        MARKER,
        "",
        f"# Lessons for {area.slug}",
        "",
        START,
        header,
        *(line(entry) for entry in area.entries),
        END,
        "",
    ]
    return "\n".join(lines).encode("utf-8")


def is_managed(data: bytes) -> bool:
    """Whether a file carries the bot's marker line (a person's file never does)."""
    head = data[: 64 * 1024].decode("utf-8", "replace").splitlines()[:_MARKER_LINES]
    return any(text.strip() == MARKER for text in head)

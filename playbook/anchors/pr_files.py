"""Which anchored lessons a pull request's changed files touch, by the one glob rule (`globs`).

A renamed file counts by its new path and by its old one: a lesson anchored to the old
path is about this change too.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from playbook.anchors import globs

# GitHub lists at most 3,000 files of a pull request ("List pull requests files").
MAX_FILES = 3_000


@dataclass(frozen=True)
class ChangedFile:
    """A file a pull request changes, and its old path when the change renames it."""

    path: str
    previous: str | None = None

    def paths(self) -> tuple[str, ...]:
        """Its paths: a lesson anchored to a renamed file's old path is about this change too."""
        return (self.path,) if not self.previous else (self.path, self.previous)


@dataclass(frozen=True)
class Anchored:
    """A lesson some changed files match: its id and those files, in the PR's order."""

    bullet_id: str
    files: tuple[str, ...]


def anchored(
    lessons: Iterable[tuple[str, Sequence[str] | None]], changed: Sequence[ChangedFile]
) -> list[Anchored]:
    """The lessons (id, globs) whose globs match a changed file, each with the files matched.

    Only the first `MAX_FILES` changed files are read (GitHub lists no more), and a lesson's
    globs are read only when they are a list of strings.
    """
    # Each path split once and each glob read once (3,000 files times the anchored lessons).
    owners = [f.path for f in changed[:MAX_FILES] for _ in f.paths()]
    index = globs.Index(path for f in changed[:MAX_FILES] for path in f.paths())
    found: list[Anchored] = []
    for bullet_id, lesson_globs in lessons:
        if not isinstance(lesson_globs, list | tuple):
            continue
        hit = index.matching(lesson_globs)
        if hit:
            paths = dict.fromkeys(owners[i] for i in sorted(hit))
            found.append(Anchored(bullet_id, tuple(paths)))
    return found

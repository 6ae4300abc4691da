"""A repository's history extract read back, the anchors a commit's lesson gets, and who is where.

The extract is bench/extract_history.py's: a header line, then one line per commit (date,
ticket keys, changed files with git's status). `capture` gives a lesson learned from a change
its anchors by the bot's own rule (`playbook.anchors.capture`), and `AnchorIndex` finds the
lessons a path touches without reading every lesson.
"""

from __future__ import annotations

import gzip
import json
from collections import Counter, defaultdict, deque
from collections.abc import Collection, Iterable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from playbook import clock
from playbook.anchors import capture as capture_rule
from playbook.anchors import stale

ROOT = Path(__file__).resolve().parents[1]
DEFAULT = ROOT / "bench" / "data" / "zookeeper-history.jsonl.gz"
# The extract's statuses as GitHub's "List pull requests files" names them.
STATUSES = {"A": "added", "M": "modified", "D": stale.REMOVED, "R": stale.RENAMED}
# The characters that make an anchor a glob rather than one file.
_GLOB_CHARS = frozenset("*?[")
# A line of the extract longer than this is not one of ours (the biggest commit is ~80 KB).
LINE_CHARS = 2_000_000


class BadHistory(ValueError):
    """The extract is not bench/extract_history.py's: says which line and why."""


@dataclass(frozen=True)
class Commit:
    """One commit of the extract: when it landed, the tickets it names, what it changed."""

    sha: str
    at: datetime
    keys: tuple[str, ...]
    changes: tuple[stale.FileChange, ...]

    def paths(self) -> set[str]:
        """Every path the commit touched, old names of renamed files included."""
        out = {change.path for change in self.changes}
        out.update(change.previous for change in self.changes if change.previous)
        return out


def load(path: Path = DEFAULT) -> tuple[dict[str, Any], list[Commit]]:
    """The extract's header and its commits, oldest first."""
    meta: dict[str, Any] = {}
    commits: list[Commit] = []
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as lines:
        for number, line in enumerate(lines, 1):
            if len(line) > LINE_CHARS:
                raise BadHistory(f"{path.name} line {number}: over {LINE_CHARS:,} characters")
            if not line.strip():
                continue
            try:
                row = json.loads(line)
                if "meta" in row:
                    meta = dict(row["meta"])
                    continue
                commits.append(commit(row))
            except KeyError as error:
                raise BadHistory(f"{path.name} line {number}: no {error.args[0]!r} field") from None
            except (ValueError, TypeError, IndexError) as error:
                raise BadHistory(f"{path.name} line {number}: {error}") from None
    commits.sort(key=lambda c: c.at)
    return meta, commits


def commit(row: dict[str, Any]) -> Commit:
    """One line of the extract as a Commit; ValueError/KeyError when it is not one."""
    changes = []
    for entry in row["files"]:
        status = STATUSES.get(entry[0])
        if status is None:
            raise ValueError(f"unknown status {str(entry[0])[:10]!r}")
        previous = str(entry[2]) if entry[0] == "R" else None
        changes.append(stale.FileChange(status, str(entry[1]), previous))
    return Commit(
        sha=str(row["commit"])[:40],
        at=clock.parse_time(str(row["date"])),
        keys=tuple(str(key) for key in row["keys"]),
        changes=tuple(changes),
    )


def capture(
    changes: Iterable[stale.FileChange], busy: Collection[str] = ()
) -> tuple[str, list[str]]:
    """The anchors of a lesson learned from a change, and which branch of the rule gave them.

    The bot's own rule (`playbook.anchors.capture.from_changes`: a few files are the anchors
    themselves, else one common folder per top-level folder when few, else none), over the
    change without the ``busy`` files (see `Busy`; none for the rule as the bot ships it).
    """
    kept = [change for change in changes if change.path not in busy]
    anchors = capture_rule.from_changes(kept) or []
    if not anchors:
        return "none", []
    folders = [anchor for anchor in anchors if anchor.endswith("/**")]
    if not folders:
        return "files", anchors
    return ("folder" if len(anchors) == 1 else "folders"), anchors


class Busy:
    """The files most changes touch lately (a changelog, a build file): no lesson's subject.

    A file changed by at least SHARE of the last WINDOW commits is busy: a lesson anchored to
    it would be flagged by nearly every later change, whatever the change is about. Known
    from the commits so far only, as a bot would know it.
    """

    WINDOW = 100
    SHARE = 0.2

    def __init__(self) -> None:
        self.recent: deque[set[str]] = deque()
        self.counts: Counter[str] = Counter()
        self.left_out: Counter[str] = Counter()  # how many lessons each file was kept out of

    def files(self) -> set[str]:
        """The busy files now."""
        floor = self.SHARE * self.WINDOW
        return {path for path, n in self.counts.items() if n >= floor}

    def saw(self, commit: Commit) -> None:
        """Count ``commit``'s files (after its lesson was made)."""
        paths = {change.path for change in commit.changes}
        self.recent.append(paths)
        self.counts.update(paths)
        if len(self.recent) > self.WINDOW:
            self.counts.subtract(self.recent.popleft())
            self.counts = +self.counts  # drop the zeros


class AnchorIndex:
    """The lessons anchored to each file and folder, for a path's lessons without a full scan.

    Exact for the two shapes `capture` makes (a file, `dir/**`): a path touches the lessons
    anchored to it and to each folder above it. `exact` turns False when an anchor of any
    other shape is added; callers then read every lesson.
    """

    def __init__(self) -> None:
        self.by_anchor: dict[str, set[str]] = defaultdict(set)
        self.anchors: dict[str, list[str]] = {}
        self.exact = True

    def put(self, lesson_id: str, anchors: list[str]) -> None:
        """Set ``lesson_id``'s anchors (a rename followed rewrites them)."""
        for anchor in self.anchors.get(lesson_id, []):
            self.by_anchor[anchor].discard(lesson_id)
        self.anchors[lesson_id] = list(anchors)
        for anchor in anchors:
            self.by_anchor[anchor].add(lesson_id)
            folder = anchor.removesuffix("/**")
            if _GLOB_CHARS & set(folder):
                self.exact = False

    def touching(self, path: str) -> set[str]:
        """The lessons one of whose anchors matches ``path``."""
        found = set(self.by_anchor.get(path, ()))
        parts = path.split("/")
        for i in range(1, len(parts)):
            found.update(self.by_anchor.get("/".join(parts[:i]) + "/**", ()))
        return found

    def lessons_named(self, paths: Iterable[str]) -> set[str]:
        """The lessons anchored to one of ``paths`` by name (not by a folder)."""
        found: set[str] = set()
        for path in paths:
            found |= self.by_anchor.get(path, set())
        return found

    def lessons_touching(self, paths: Iterable[str]) -> set[str]:
        """The lessons anchored to any of ``paths``."""
        found: set[str] = set()
        for path in paths:
            found |= self.touching(path)
        return found


def live_files(commits: Iterable[Commit]) -> set[str]:
    """The files there after ``commits``: added and renamed in, deleted and renamed out."""
    files: set[str] = set()
    for c in commits:
        for change in c.changes:
            if change.status == stale.REMOVED:
                files.discard(change.path)
            elif change.status == stale.RENAMED:
                files.discard(change.previous or "")
                files.add(change.path)
            else:
                files.add(change.path)
    return files


def folders_of(files: Iterable[str]) -> set[str]:
    """Every folder holding one of ``files`` (at any depth), as `dir/**`."""
    out: set[str] = set()
    for path in files:
        parts = path.split("/")
        for i in range(1, len(parts)):
            out.add("/".join(parts[:i]) + "/**")
    return out


def tails(path: str) -> list[str]:
    """``path`` and each of its trailing parts: `a/b/c.py`, `b/c.py`, `c.py`."""
    parts = path.split("/")
    return ["/".join(parts[i:]) for i in range(len(parts))]

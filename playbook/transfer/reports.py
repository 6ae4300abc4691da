"""What an import did, and what was wrong with a file it refused: shared by every import."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from sqlalchemy.orm import Session

from playbook.errors import InvalidInput

# Entries written per committed transaction: big enough that commits cost little, small
# enough that a failure loses little work and a progress bar moves.
BATCH_SIZE = 1000
# Problems a refused import lists; the rest are counted.
SHOWN_PROBLEMS = 5
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


class Problems:
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


def commit(session: Session) -> None:
    session.commit()
    # Nothing written is needed again: drop it, so memory stays flat however long the file.
    session.expunge_all()

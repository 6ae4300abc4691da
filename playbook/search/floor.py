"""When the bot speaks: the relevance floor a comment's best lesson must reach, and its lessons'."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Protocol, TypeVar

from playbook.search import relevance


class Estimated(Protocol):
    """A ranked lesson with its relevance estimate (`retrieval.Hit`)."""

    @property
    def relevance(self) -> float | None: ...

    @property
    def rank(self) -> int: ...


H = TypeVar("H", bound=Estimated)


@dataclass(frozen=True)
class Floor:
    """A comment is posted when its best lesson reaches ``comment``; it shows those reaching
    ``lesson`` (a lower bar: once one lesson clearly fits, a near one is worth a line too)."""

    comment: float
    lesson: float

    @classmethod
    def of(cls, min_relevance: float, model: relevance.Model | None = None) -> Floor:
        """The floors for a setting: ``min_relevance`` gates the comment; the lessons' floor
        keeps the model's ratio to it (the bench chose both together)."""
        model = model or relevance.default_model()
        ratio = model.lesson_ratio
        return cls(comment=min_relevance, lesson=min_relevance * ratio)

    def shown(self, hits: Sequence[H]) -> list[H]:
        """The hits the comment shows, ranked again from 1; none when the best is below the floor.

        A hit without an estimate counts as fitting: the floor only removes what it measured.
        """

        def level(hit: H) -> float:
            return 1.0 if hit.relevance is None else hit.relevance

        if not hits or max(level(hit) for hit in hits) < self.comment:
            return []
        kept = [hit for hit in hits if level(hit) >= self.lesson]
        return [replace(hit, rank=i) for i, hit in enumerate(kept, 1)]  # type: ignore[type-var]


def default_min_relevance() -> float:
    """The comment floor the packaged model's bench chose (PLAYBOOK_MIN_RELEVANCE's default)."""
    return relevance.default_model().floor

"""The stats report as agents and the API read it: typed, and limited to the caller's view."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, Field
from sqlalchemy.orm import Session

from playbook import upkeep
from playbook.consolidation import budget

if TYPE_CHECKING:
    from playbook.agents import Caller

Status = Literal["proposed", "active", "deprecated", "archived", "superseded"]


class LessonCounts(BaseModel):
    """Lessons in total, by status, and by scope and status."""

    total: int
    by_status: dict[str, int]
    by_scope: dict[str, dict[str, int]]


class UsageCounts(BaseModel):
    """Loads and cites, and the outcomes of the work that cited."""

    loads: int
    cites: int
    successes: int
    failures: int
    unknown_outcome: int
    not_counted: int = Field(
        0, description="Reports recorded about tickets the bot never saw: they weigh nothing."
    )


class Coverage(BaseModel):
    """Tickets searched, and how many got at least one lesson."""

    tickets: int
    with_lessons: int
    share: float | None


class CommentCounts(BaseModel):
    """Tickets the bot judged: with a lessons comment, or none because nothing fitted."""

    tickets: int = 0
    posted: int = 0
    abstained: int = Field(
        0, description="No lesson reached the relevance floor: no comment, or one saying so."
    )
    share_posted: float | None = None


class OffTopicLesson(BaseModel):
    """A lesson people often mark as not fitting the tickets it is shown on."""

    id: str
    text: str
    unhelpful: int
    helpful: int
    people: int
    tickets: int
    last_reason: str | None = None


class CiteRateCounts(BaseModel):
    """(ticket, lesson) pairs shown, and those also cited on that ticket."""

    loaded: int
    cited: int


class RatingCounts(BaseModel):
    """Model ratings of lessons shown on PRs that did not cite them: each in [-1, 1]."""

    count: int = 0
    lessons: int = Field(0, description="Lessons with at least one rating.")
    mean: float | None = Field(None, description="The mean score; None before any rating.")


class Rated(BaseModel):
    """A lesson with its merged and rejected cites."""

    id: str
    text: str
    status: Status
    cites_success: int
    cites_failure: int
    confidence: float


class Demoted(BaseModel):
    """A lesson demoted in the last 30 days."""

    id: str
    status: Status
    demoted_on: datetime
    demoted_reason: str | None
    learned_from: str | None


class StaleWeek(BaseModel):
    """Lessons flagged possibly stale in the last 7 days, by how each flag was resolved."""

    flagged: int = 0
    cleared: int = 0
    edited: int = 0
    superseded: int = 0
    deprecated: int = Field(0, description="Deprecated by a maintainer.")
    deprecated_by_bot: int = Field(
        0,
        description="Deprecated by the bot itself (its work rejected or reverted, or measured "
        "harmful): the flag ended, but no maintainer looked.",
    )
    open: int = Field(0, description="Still flagged: no maintainer has looked yet.")


class StaleCounts(BaseModel):
    """Lessons a merged PR may have made stale (`playbook-bot stale`), and the week's digest."""

    flagged: int = Field(0, description="Lessons flagged now, waiting for a maintainer.")
    week: StaleWeek = Field(default_factory=StaleWeek)


class ScopeBudget(BaseModel):
    """A scope's active lessons against its context budget (what an agent's context gives it)."""

    scope: str
    lessons: int
    chars: int = Field(description="Characters of the scope's active lessons.")
    budget: int = Field(description="The scope's context budget in characters.")
    share: float = Field(description="chars / budget.")
    over: bool = Field(
        description="Past 75% of the budget: the scheduled run proposes consolidations."
    )


class Stats(BaseModel):
    """How the playbook is doing (the `playbook-bot stats` report).

    For a token bound to a scope, every count and list covers only what that token may read:
    its scope's lessons and the global ones, usage of global lessons in its own work (its
    tickets and pull requests, and what it reported), and searches for its tickets.
    """

    bullets: LessonCounts
    usage: UsageCounts
    coverage: Coverage
    comments: CommentCounts = Field(default_factory=CommentCounts)
    off_topic: list[OffTopicLesson] = Field(
        default_factory=list,
        description="Lessons people often mark as not fitting (👎, `/playbook unhelpful`): at "
        "least 3 such verdicts from 2 people on 2 tickets, two thirds of its verdicts. Read "
        "them, then narrow the text, retag or move the scope; nothing is done automatically.",
    )
    cite_rate: float | None
    cite_rate_counts: CiteRateCounts
    ratings: RatingCounts = Field(default_factory=RatingCounts)
    most_helpful: list[Rated]
    most_harmful: list[Rated]
    measured_harmful: list[MeasuredHarmful] = Field(
        default_factory=list,
        description="Active lessons the holdout experiment measured as harmful: the whole 95% "
        "interval of their effect on the merge rate below zero. `prune --apply` deprecates them.",
    )
    recently_demoted: list[Demoted]
    stale: StaleCounts = Field(
        default_factory=StaleCounts,
        description="Lessons anchored to code a merged PR changed: flagged for a maintainer, "
        "who confirms (edit, supersede, deprecate) or clears each; never deprecated by itself.",
    )
    scopes: list[ScopeBudget] = Field(
        default_factory=list,
        description="Each scope's size against its context budget, by scope.",
    )


class MeasuredHarmful(BaseModel):
    """A lesson whose tickets merged less often when shown it than when held out from it."""

    id: str
    text: str
    difference: float
    ci: list[float]


def stats(
    session: Session,
    caller: Caller,
    effect_min_tickets: int = 20,
    budget_for: Callable[[str], int] | None = None,
) -> Stats:
    """How the playbook is doing, as far as ``caller`` may see (the `playbook-bot stats` report).

    With ``budget_for`` (a scope's context budget), each scope the caller sees is sized
    against it.
    """
    report = upkeep.stats(session, view=caller.view, effect_min_tickets=effect_min_tickets)
    if budget_for is not None:
        view = caller.view
        report["scopes"] = [
            s for s in scope_budgets(session, budget_for) if view.sees_scope(s["scope"])
        ]
    return Stats.model_validate(report)


def scope_budgets(session: Session, budget_for: Callable[[str], int]) -> list[dict[str, object]]:
    """Each scope with active lessons: its lessons, characters, budget, share and whether it is
    past the threshold, by scope."""
    return [
        {
            "scope": size.scope,
            "lessons": size.lessons,
            "chars": size.chars,
            "budget": size.budget,
            "share": round(size.share, 4),
            "over": size.over,
        }
        for size in sorted(budget.scope_sizes(session, budget_for), key=lambda s: s.scope)
    ]


# The name the HTTP edge uses, where `stats` is its route's own name.
stats_of = stats

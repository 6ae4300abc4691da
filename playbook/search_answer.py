"""What a search answers on every door (API, MCP): the ranked lessons and their fit."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from playbook.search.rerank_fields import RerankedAnswer, RerankedLesson
from playbook.search.search_scope import Searched


class Hit(RerankedLesson):
    """One lesson of a search, ranked as the bot ranks lessons for a ticket."""

    rank: int
    id: str
    text: str
    learned_from: str | None
    scope: str
    score: float
    confidence: float
    relevance: float = Field(
        description="Estimated probability that the lesson fits the task (0..1, calibrated on "
        "linked Jira issues; the bot comments when a lesson reaches its floor)."
    )
    fit: Literal["strong", "possible", "weak"] = Field(
        description="The estimate in words: weak is below the floor the bot's comments use."
    )
    matched: list[str] = Field(
        description="The task's words (as written there) the lesson matched, rarest first."
    )


class SearchAnswer(RerankedAnswer):
    """The lessons that fit a task; cite their ids in the PR body to close the loop."""

    query_id: str
    ticket: str | None = Field(description="The ticket the lessons were recorded as loaded for.")
    loads_recorded: int
    searched: Searched = Field(
        description="Which lessons were searched: a ticket's scope and global, a scope named "
        "and global, or (naming neither) every scope the caller may read."
    )
    lessons: list[Hit]
    held_out: bool = Field(
        False,
        description="True when the ticket is in the holdout experiment's held-out arm: it gets "
        "no lessons from any door, so the playbook's effect can be measured.",
    )
    reason: str | None = Field(None, description="Why no lessons were returned, when held out.")

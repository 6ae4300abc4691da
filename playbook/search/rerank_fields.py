"""The semantic rerank's fields of a search answer, shared by the API and MCP answer models."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field


class RerankedLesson(BaseModel):
    """A found lesson's place in the semantic rerank, when it ranked the lessons."""

    similarity: float | None = Field(
        None, description="Cosine with the ticket's embedding, when the semantic rerank ranked it."
    )
    text_rank: int | None = Field(
        None,
        description="Its place in the text ranking, when the semantic rerank ranked it "
        "(null: found by similarity only, or no rerank).",
    )


class RerankedAnswer(BaseModel):
    """Whether a search's lessons were ranked with the semantic rerank, and why not."""

    rerank: Literal["off", "used", "fallback"] = Field(
        "off",
        description="The semantic rerank: off (no embedding model configured), used, or "
        "fallback (ranked by text alone; `rerank_reason` says why).",
    )
    rerank_reason: str | None = Field(
        None, description="Why the rerank fell back to the text ranking (endpoint slow, down...)."
    )

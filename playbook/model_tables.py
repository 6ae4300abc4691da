"""The tables of the optional model features: ratings, daily budgets, consolidations, embeddings."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import (
    JSON,
    BigInteger,
    Float,
    ForeignKey,
    Integer,
    LargeBinary,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy.orm import Mapped, mapped_column

from playbook.model_base import Base, BigId, UTCDateTime


class Rating(Base):
    """A model's rating of a lesson shown for a ticket that a PR did not cite: did it help?"""

    __tablename__ = "ratings"
    # One rating per lesson and PR: a job run twice, or a backfill, rates nothing twice.
    __table_args__ = (UniqueConstraint("bullet_id", "pr_key", name="uq_ratings_bullet_id"),)

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    bullet_id: Mapped[str] = mapped_column(String(64), ForeignKey("bullets.id"))
    ticket_key: Mapped[str | None] = mapped_column(String(200))
    pr_key: Mapped[str] = mapped_column(String(200), index=True)
    score: Mapped[float] = mapped_column(Float)  # -1 (went against it) .. +1 (followed it)
    reason: Mapped[str] = mapped_column(Text)
    model: Mapped[str] = mapped_column(String(200))
    prompt_version: Mapped[str] = mapped_column(String(50))
    rated_at: Mapped[datetime] = mapped_column(UTCDateTime, index=True)


class ModelUsage(Base):
    """What the model endpoint cost on one UTC day, checked against the daily budgets."""

    __tablename__ = "model_usage"

    day: Mapped[str] = mapped_column(String(10), primary_key=True)  # 2026-11-27
    calls: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    tokens: Mapped[int] = mapped_column(BigInteger, default=0, server_default="0")
    failures: Mapped[int] = mapped_column(Integer, default=0, server_default="0")


class Consolidation(Base):
    """A proposal to merge a group of overlapping lessons of one scope into one lesson."""

    __tablename__ = "consolidations"

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    scope: Mapped[str] = mapped_column(String(200), index=True)
    # members_hash covers texts too: a rejected group comes back only once a member changed.
    member_ids: Mapped[list[str]] = mapped_column(JSON, default=list)
    group_key: Mapped[str] = mapped_column(String(64), index=True)
    members_hash: Mapped[str] = mapped_column(String(64))
    draft: Mapped[str] = mapped_column(Text)
    draft_source: Mapped[str] = mapped_column(String(20))  # longest | model | edited
    model: Mapped[str | None] = mapped_column(String(200))
    dropped_terms: Mapped[dict[str, list[str]]] = mapped_column(JSON, default=dict)
    saves_chars: Mapped[int] = mapped_column(Integer, default=0)
    similarity: Mapped[float] = mapped_column(Float, default=0.0)
    status: Mapped[str] = mapped_column(String(16), default="open", index=True)
    merged_id: Mapped[str | None] = mapped_column(String(64), ForeignKey("bullets.id"))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)
    decided_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    decided_by: Mapped[str | None] = mapped_column(String(200))
    reason: Mapped[str | None] = mapped_column(Text)


class Embedding(Base):
    """A lesson's embedding by one model, with the hash of the text it was computed from."""

    __tablename__ = "embeddings"

    bullet_id: Mapped[str] = mapped_column(String(64), ForeignKey("bullets.id"), primary_key=True)
    model: Mapped[str] = mapped_column(String(200))
    text_hash: Mapped[str] = mapped_column(String(64))
    dim: Mapped[int] = mapped_column(Integer)
    vector: Mapped[bytes] = mapped_column(LargeBinary)  # float32, little-endian
    # The `embedding_version` counter at the last write: indexes read what is newer.
    version: Mapped[int] = mapped_column(BigInteger, index=True)
    computed_at: Mapped[datetime] = mapped_column(UTCDateTime)

"""The tables of people's fit verdicts and of each scope's recalibration from them."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Boolean, Float, ForeignKey, Integer, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from playbook.model_base import Base, BigId, UTCDateTime


class FitLabel(Base):
    """A person's verdict on whether a lesson fitted a ticket: a 👍/👎 or a `/playbook` reply.

    About fit for that ticket, not the lesson's truth: it never changes a lesson's status or
    confidence, only the per-scope calibration of the relevance estimate. One per person,
    ticket, lesson and source: a changed mind replaces the verdict; a removed reaction drops it.
    """

    __tablename__ = "fit_labels"
    __table_args__ = (
        UniqueConstraint(
            "ticket_key", "bullet_id", "actor", "source", name="uq_fit_labels_ticket_bullet_actor"
        ),
    )

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    scope: Mapped[str] = mapped_column(String(200), index=True)
    ticket_key: Mapped[str] = mapped_column(String(200), index=True)
    bullet_id: Mapped[str] = mapped_column(String(64), ForeignKey("bullets.id"), index=True)
    helpful: Mapped[bool] = mapped_column(Boolean)
    source: Mapped[str] = mapped_column(String(16))  # reaction | command
    target: Mapped[str] = mapped_column(String(16))  # github | jira
    actor: Mapped[str] = mapped_column(String(200))
    reason: Mapped[str | None] = mapped_column(Text)
    # The estimate when the lesson was shown (None: it was not in the bot's comment).
    relevance: Mapped[float | None] = mapped_column(Float)
    at: Mapped[datetime] = mapped_column(UTCDateTime, index=True)


class FitCalibration(Base):
    """A scope's recalibration of the relevance estimate, fitted from its people's verdicts."""

    __tablename__ = "fit_calibrations"

    scope: Mapped[str] = mapped_column(String(200), primary_key=True)
    labels: Mapped[int] = mapped_column(Integer)
    helpful: Mapped[int] = mapped_column(Integer)
    # Added to the estimate's log-odds for this scope's tickets, within bounds.
    shift: Mapped[float] = mapped_column(Float)
    fitted_at: Mapped[datetime] = mapped_column(UTCDateTime)

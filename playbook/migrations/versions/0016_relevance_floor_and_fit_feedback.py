"""relevance floor and fit feedback

`retrievals.spoke` says whether the bot's comment search showed lessons or kept quiet;
`bot_comments` keeps each shown lesson's relevance estimate and its reactions' ETag;
`fit_labels` holds people's verdicts (👍/👎, `/playbook helpful|unhelpful`) on whether a lesson
fitted a ticket; `fit_calibrations` each scope's recalibration fitted from them.

Revision ID: 0016
Revises: 0015
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0016"
down_revision: str | None = "0015"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("retrievals") as batch:
        batch.add_column(sa.Column("spoke", sa.Boolean(), nullable=True))
    with op.batch_alter_table("bot_comments") as batch:
        batch.add_column(sa.Column("relevances", sa.JSON(), nullable=True))
        batch.add_column(sa.Column("reactions_etag", sa.String(length=200), nullable=True))
        batch.add_column(
            sa.Column("reactions_read_at", sa.DateTime(timezone=True), nullable=True)
        )
    op.create_table(
        "fit_labels",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("scope", sa.String(length=200), nullable=False),
        sa.Column("ticket_key", sa.String(length=200), nullable=False),
        sa.Column("bullet_id", sa.String(length=64), nullable=False),
        sa.Column("helpful", sa.Boolean(), nullable=False),
        sa.Column("source", sa.String(length=16), nullable=False),
        sa.Column("target", sa.String(length=16), nullable=False),
        sa.Column("actor", sa.String(length=200), nullable=False),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.Column("relevance", sa.Float(), nullable=True),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["bullet_id"], ["bullets.id"], name=op.f("fk_fit_labels_bullet_id_bullets")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_fit_labels")),
        sa.UniqueConstraint(
            "ticket_key", "bullet_id", "actor", "source", name="uq_fit_labels_ticket_bullet_actor"
        ),
    )
    op.create_index(op.f("ix_fit_labels_scope"), "fit_labels", ["scope"])
    op.create_index(op.f("ix_fit_labels_ticket_key"), "fit_labels", ["ticket_key"])
    op.create_index(op.f("ix_fit_labels_bullet_id"), "fit_labels", ["bullet_id"])
    op.create_index(op.f("ix_fit_labels_at"), "fit_labels", ["at"])
    op.create_table(
        "fit_calibrations",
        sa.Column("scope", sa.String(length=200), nullable=False),
        sa.Column("labels", sa.Integer(), nullable=False),
        sa.Column("helpful", sa.Integer(), nullable=False),
        sa.Column("shift", sa.Float(), nullable=False),
        sa.Column("fitted_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("scope", name=op.f("pk_fit_calibrations")),
    )


def downgrade() -> None:
    op.drop_table("fit_calibrations")
    op.drop_index(op.f("ix_fit_labels_at"), table_name="fit_labels")
    op.drop_index(op.f("ix_fit_labels_bullet_id"), table_name="fit_labels")
    op.drop_index(op.f("ix_fit_labels_ticket_key"), table_name="fit_labels")
    op.drop_index(op.f("ix_fit_labels_scope"), table_name="fit_labels")
    op.drop_table("fit_labels")
    with op.batch_alter_table("bot_comments") as batch:
        batch.drop_column("reactions_read_at")
        batch.drop_column("reactions_etag")
        batch.drop_column("relevances")
    with op.batch_alter_table("retrievals") as batch:
        batch.drop_column("spoke")

"""model jobs: ratings of shown lessons, their sums on bullets, the model's daily usage

`ratings` holds one model rating per lesson and PR (score in [-1, 1], reason, model, prompt
version); `bullets.ratings` and `bullets.rating_sum` keep their count and sum for ranking;
`model_usage` counts the calls and tokens spent per UTC day, for the daily budgets.

Revision ID: 0014
Revises: 0013
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0014"
down_revision: str | None = "0013"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # Plain ALTER TABLE with a server default (see 0013 for why not batch mode).
    op.add_column(
        "bullets", sa.Column("ratings", sa.Integer(), nullable=False, server_default="0")
    )
    op.add_column(
        "bullets", sa.Column("rating_sum", sa.Float(), nullable=False, server_default="0")
    )
    op.create_index(op.f("ix_bullets_rating_sum"), "bullets", ["rating_sum"])
    op.create_table(
        "ratings",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("bullet_id", sa.String(length=64), nullable=False),
        sa.Column("ticket_key", sa.String(length=200), nullable=True),
        sa.Column("pr_key", sa.String(length=200), nullable=False),
        sa.Column("score", sa.Float(), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("model", sa.String(length=200), nullable=False),
        sa.Column("prompt_version", sa.String(length=50), nullable=False),
        sa.Column("rated_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["bullet_id"], ["bullets.id"], name=op.f("fk_ratings_bullet_id_bullets")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_ratings")),
        sa.UniqueConstraint("bullet_id", "pr_key", name=op.f("uq_ratings_bullet_id")),
    )
    op.create_index(op.f("ix_ratings_pr_key"), "ratings", ["pr_key"])
    op.create_index(op.f("ix_ratings_rated_at"), "ratings", ["rated_at"])
    op.create_table(
        "model_usage",
        sa.Column("day", sa.String(length=10), nullable=False),
        sa.Column("calls", sa.Integer(), nullable=False, server_default="0"),
        sa.Column("tokens", sa.BigInteger(), nullable=False, server_default="0"),
        sa.Column("failures", sa.Integer(), nullable=False, server_default="0"),
        sa.PrimaryKeyConstraint("day", name=op.f("pk_model_usage")),
    )


def downgrade() -> None:
    op.drop_table("model_usage")
    op.drop_index(op.f("ix_ratings_rated_at"), table_name="ratings")
    op.drop_index(op.f("ix_ratings_pr_key"), table_name="ratings")
    op.drop_table("ratings")
    op.drop_index(op.f("ix_bullets_rating_sum"), table_name="bullets")
    op.drop_column("bullets", "rating_sum")
    op.drop_column("bullets", "ratings")

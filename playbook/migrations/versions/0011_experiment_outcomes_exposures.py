"""experiment outcomes and exposures: each ticket's outcome, the lessons shown or held out

`experiment_assignments` gains the ticket's spelling in the bot's other tables, its creation
time and its outcome from linked pull requests (merged, closed unmerged, review rounds);
`experiment_exposures` keeps the lessons each experiment ticket was shown, or would have been
shown when held out, apart from loads; `experiment_reviews` the changes-requested reviews.

Revision ID: 0011
Revises: 0010
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

import playbook.models

revision: str = "0011"
down_revision: str | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_TIME = playbook.models.UTCDateTime(timezone=True)


def upgrade() -> None:
    with op.batch_alter_table("experiment_assignments") as batch:
        batch.add_column(sa.Column("ticket_ref", sa.String(length=200), nullable=True))
        batch.add_column(sa.Column("created_at", _TIME, nullable=True))
        batch.add_column(sa.Column("outcome", sa.String(length=16), nullable=True))
        batch.add_column(sa.Column("merged_at", _TIME, nullable=True))
        batch.add_column(
            sa.Column("closed_unmerged", sa.Boolean(), server_default=sa.false(), nullable=False)
        )
        batch.add_column(
            sa.Column("review_rounds", sa.Integer(), server_default="0", nullable=False)
        )
        batch.create_index("ix_experiment_assignments_assigned_at", ["assigned_at"])
        batch.create_index("ix_experiment_assignments_ticket_ref", ["ticket_ref"])
    op.create_table(
        "experiment_exposures",
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            autoincrement=True,
            nullable=False,
        ),
        sa.Column("ticket_key", sa.String(length=200), nullable=False),
        sa.Column("bullet_id", sa.String(length=64), nullable=False),
        sa.Column("arm", sa.String(length=16), nullable=False),
        sa.Column("rank", sa.Integer(), nullable=True),
        sa.Column("query_id", sa.String(length=64), nullable=True),
        sa.Column("consumer", sa.String(length=200), nullable=True),
        sa.Column("at", _TIME, nullable=False),
        sa.ForeignKeyConstraint(
            ["bullet_id"],
            ["bullets.id"],
            name=op.f("fk_experiment_exposures_bullet_id_bullets"),
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_experiment_exposures")),
        sa.UniqueConstraint(
            "ticket_key", "bullet_id", name="uq_experiment_exposures_ticket_bullet"
        ),
    )
    op.create_index(
        "ix_experiment_exposures_bullet_arm", "experiment_exposures", ["bullet_id", "arm"]
    )
    op.create_index(
        "ix_experiment_exposures_ticket_bullet_arm",
        "experiment_exposures",
        ["ticket_key", "bullet_id", "arm"],
    )
    op.create_table(
        "experiment_reviews",
        sa.Column("review_id", sa.BigInteger(), autoincrement=False, nullable=False),
        sa.Column("pr_key", sa.String(length=200), nullable=False),
        sa.Column("submitted_at", _TIME, nullable=False),
        sa.PrimaryKeyConstraint("review_id", name=op.f("pk_experiment_reviews")),
    )
    op.create_index(op.f("ix_experiment_reviews_pr_key"), "experiment_reviews", ["pr_key"])


def downgrade() -> None:
    op.drop_index(op.f("ix_experiment_reviews_pr_key"), table_name="experiment_reviews")
    op.drop_table("experiment_reviews")
    op.drop_index("ix_experiment_exposures_ticket_bullet_arm", table_name="experiment_exposures")
    op.drop_index("ix_experiment_exposures_bullet_arm", table_name="experiment_exposures")
    op.drop_table("experiment_exposures")
    with op.batch_alter_table("experiment_assignments") as batch:
        batch.drop_index("ix_experiment_assignments_ticket_ref")
        batch.drop_index("ix_experiment_assignments_assigned_at")
        for column in (
            "review_rounds",
            "closed_unmerged",
            "merged_at",
            "outcome",
            "created_at",
            "ticket_ref",
        ):
            batch.drop_column(column)

"""experiment holdout: each ticket's arm, the periods the experiment ran, its generated salt

`experiment_assignments` keeps the arm (shown / held_out) and the percentage in force for
each ticket when the experiment first sees it; `experiment_periods` the starts and stops with
who made them; `experiment_salt` the one generated key of the assigning hash when
PLAYBOOK_EXPERIMENT_SALT is unset. All start empty: the experiment is off until started.

Revision ID: 0010
Revises: 0009
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

import playbook.models

revision: str = '0010'
down_revision: str | None = '0009'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        'experiment_assignments',
        sa.Column('ticket_key', sa.String(length=200), nullable=False),
        sa.Column('arm', sa.String(length=16), nullable=False),
        sa.Column('percent', sa.Integer(), nullable=False),
        sa.Column('assigned_at', playbook.models.UTCDateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint('ticket_key', name=op.f('pk_experiment_assignments')),
    )
    op.create_table(
        'experiment_periods',
        sa.Column(
            'id',
            sa.BigInteger().with_variant(sa.Integer(), 'sqlite'),
            autoincrement=True,
            nullable=False,
        ),
        sa.Column('percent', sa.Integer(), nullable=False),
        sa.Column('started_at', playbook.models.UTCDateTime(timezone=True), nullable=False),
        sa.Column('started_by', sa.String(length=200), nullable=False),
        sa.Column('stopped_at', playbook.models.UTCDateTime(timezone=True), nullable=True),
        sa.Column('stopped_by', sa.String(length=200), nullable=True),
        sa.PrimaryKeyConstraint('id', name=op.f('pk_experiment_periods')),
    )
    op.create_table(
        'experiment_salt',
        sa.Column('id', sa.Integer(), autoincrement=False, nullable=False),
        sa.Column('value', sa.LargeBinary(), nullable=False),
        sa.Column('created_at', playbook.models.UTCDateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint('id', name=op.f('pk_experiment_salt')),
    )


def downgrade() -> None:
    op.drop_table('experiment_salt')
    op.drop_table('experiment_periods')
    op.drop_table('experiment_assignments')

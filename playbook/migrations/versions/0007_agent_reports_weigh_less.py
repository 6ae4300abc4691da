"""agent reports weigh less: their source, whether they count, seen tickets, rate windows

Revision ID: 0007
Revises: 0006
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

import playbook.models

revision: str = '0007'
down_revision: str | None = '0006'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # Existing events keep counting as they did: counted defaults to true, source to unknown.
    with op.batch_alter_table('usage_events', schema=None) as batch_op:
        batch_op.add_column(sa.Column('source', sa.String(length=200), nullable=True))
        batch_op.add_column(
            sa.Column('counted', sa.Boolean(), server_default=sa.true(), nullable=False)
        )
        batch_op.add_column(sa.Column('claimed_success', sa.Boolean(), nullable=True))
        batch_op.add_column(sa.Column('discount', sa.String(length=32), nullable=True))
        batch_op.create_index('ix_usage_events_source_bullet', ['source', 'bullet_id'], unique=False)
    op.create_table(
        'seen_tickets',
        sa.Column('ticket_key', sa.String(length=200), nullable=False),
        sa.Column('via', sa.String(length=16), nullable=False),
        sa.Column('seen_at', playbook.models.UTCDateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint('ticket_key', name=op.f('pk_seen_tickets')),
    )
    op.create_table(
        'rate_windows',
        sa.Column('key', sa.String(length=200), nullable=False),
        sa.Column('window_start', sa.BigInteger(), autoincrement=False, nullable=False),
        sa.Column('hits', sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint('key', 'window_start', name=op.f('pk_rate_windows')),
    )
    # Tickets the bot already saw before this table existed: those PRs named, and those it
    # kept a comment on (both come only from verified deliveries).
    op.execute(
        "INSERT INTO seen_tickets (ticket_key, via, seen_at) "
        "SELECT ticket_key, 'pull_request', MIN(created_at) FROM ticket_links GROUP BY ticket_key"
    )
    op.execute(
        "INSERT INTO seen_tickets (ticket_key, via, seen_at) "
        "SELECT ticket_key, MIN(target), MIN(created_at) FROM bot_comments "
        "WHERE ticket_key NOT IN (SELECT ticket_key FROM seen_tickets) GROUP BY ticket_key"
    )


def downgrade() -> None:
    op.drop_table('rate_windows')
    op.drop_table('seen_tickets')
    with op.batch_alter_table('usage_events', schema=None) as batch_op:
        batch_op.drop_index('ix_usage_events_source_bullet')
        batch_op.drop_column('discount')
        batch_op.drop_column('claimed_success')
        batch_op.drop_column('counted')
        batch_op.drop_column('source')
